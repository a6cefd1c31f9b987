// ChunkedDecoder's host offload (chunked_decoder.h, "Offload" and "Offloaded attention"): the two device
// slots of the residual checkpoints and of the attention outputs, written in forward and copied to the
// host on the transfer queue, fetched one step ahead in backward.
#include "model/chunked_decoder.h"
#include "model/schedule_steps.h"
#include "ops/device.h"

namespace lt::model {

Tensor ChunkedDecoder::slot_view(int64_t j) const {
  const int64_t k = j / (config_.num_layers + 1);
  return view_at(slots_[size_t(j % 2)], 0, {batch_ * chunk_tokens(k), config_.hidden_size});
}

Tensor ChunkedDecoder::forward_checkpoint(int64_t k, int64_t l) {
  if (!transfers_) return chunk_rows(resid_[size_t(l)], k, config_.hidden_size);
  const int64_t j = k * (config_.num_layers + 1) + l;
  // The slot held checkpoint j - 2 (or the last backward's fetch): its copy must be done before the write.
  if (slot_ticket_[size_t(j % 2)] >= 0) transfers_->compute_waits_for(slot_ticket_[size_t(j % 2)]);
  return slot_view(j);
}

void ChunkedDecoder::checkpoint_written(int64_t k, int64_t l) {
  if (!transfers_) return;
  const int64_t j = k * (config_.num_layers + 1) + l;
  slot_ticket_[size_t(j % 2)] =
      transfers_->copy(chunk_rows(resid_[size_t(l)], k, config_.hidden_size), slot_view(j));
}

void ChunkedDecoder::fetch_checkpoint(int64_t j) {
  const int64_t L = config_.num_layers;
  slot_ticket_[size_t(j % 2)] = transfers_->copy(
      slot_view(j), chunk_rows(resid_[size_t(j % (L + 1))], j / (L + 1), config_.hidden_size));
}

Tensor ChunkedDecoder::backward_checkpoint(int64_t k, int64_t l) {
  if (!transfers_) return chunk_rows(resid_[size_t(l)], k, config_.hidden_size);
  const int64_t L = config_.num_layers, j = k * (L + 1) + l;
  if (j == num_chunks() * (L + 1) - 1) fetch_checkpoint(j);  // the first one backward uses
  // The next one (j - 1) goes to the other slot, whose last user (j + 1) is queued already: the copy
  // overlaps use j.
  if (j > 0) fetch_checkpoint(j - 1);
  transfers_->compute_waits_for(slot_ticket_[size_t(j % 2)]);
  return slot_view(j);
}

void ChunkedDecoder::attention_slot(LayerActivations& a, int64_t k, int64_t l) const {
  const int64_t B = batch_, C = chunk_tokens(k), H = config_.num_heads, HD = config_.head_dim;
  const size_t slot = size_t((k * config_.num_layers + l) % 2);
  a.attn_out = view_at(attn_out_slots_[slot], 0, {B, C, H, HD});
  a.attn_lse = view_at(attn_lse_slots_[slot], 0, {B, H, C});
}

void ChunkedDecoder::attention_before_write(int64_t k, int64_t l) {
  const int64_t i = k * config_.num_layers + l;
  if (attn_ticket_[size_t(i % 2)] >= 0) transfers_->compute_waits_for(attn_ticket_[size_t(i % 2)]);
}

void ChunkedDecoder::attention_written(int64_t k, int64_t l) {
  LayerActivations a;
  attention_slot(a, k, l);
  const int64_t B = batch_, C = chunk_tokens(k), H = config_.num_heads, HD = config_.head_dim;
  transfers_->copy(chunk_rows(attn_out_host_[size_t(l)], k, H * HD), a.attn_out.reshaped({B * C, H * HD}));
  // The later ticket: the copies run in order on one queue.
  attn_ticket_[size_t((k * config_.num_layers + l) % 2)] =
      transfers_->copy(view_at(attn_lse_host_[size_t(l)], B * H * offsets_[size_t(k)], {B * H * C}),
                       a.attn_lse.reshaped({B * H * C}));
}

void ChunkedDecoder::fetch_attention(int64_t i) {
  const int64_t L = config_.num_layers, k = i / L, l = i % L;
  LayerActivations a;
  attention_slot(a, k, l);
  const int64_t B = batch_, C = chunk_tokens(k), H = config_.num_heads, HD = config_.head_dim;
  transfers_->copy(a.attn_out.reshaped({B * C, H * HD}), chunk_rows(attn_out_host_[size_t(l)], k, H * HD));
  attn_ticket_[size_t(i % 2)] =
      transfers_->copy(a.attn_lse.reshaped({B * H * C}),
                       view_at(attn_lse_host_[size_t(l)], B * H * offsets_[size_t(k)], {B * H * C}));
}

void ChunkedDecoder::attention_before_use(int64_t k, int64_t l) {
  const int64_t L = config_.num_layers, i = k * L + l;
  if (i == num_chunks() * L - 1) fetch_attention(i);  // the first one backward uses
  // The next one (i - 1) goes to the other slot, whose last user (i + 1) is queued already.
  if (i > 0) fetch_attention(i - 1);
  transfers_->compute_waits_for(attn_ticket_[size_t(i % 2)]);
}

}  // namespace lt::model
