// CUDA ops vs the CPU float64 reference (GPU.md): for each op, dtype (f32, bf16) and shape (odd ones
// included), fresh seeded random inputs are rounded to the GPU dtype and uploaded, the reference is
// computed in float64 from those rounded values, outputs are NaN-poisoned before the op runs, and one table
// row (grep PARITY) gives the worst ||out - ref|| / ||ref|| over the op's outputs against the tolerance.
#include <string>
#include <vector>

#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"
#include "parity_support.h"
#include "support/test_context.h"

namespace lt::test {
namespace {

constexpr DType kDtypes[] = {DType::F32, DType::BF16, DType::F16};

std::string dims(std::initializer_list<int64_t> d) {
  std::string s = "(";
  for (int64_t v : d) s += (s.size() > 1 ? ", " : "") + std::to_string(v);
  return s + ")";
}

uint64_t seed_of(uint64_t op, DType dt, uint64_t shape) {
  return op * 1000003u + uint64_t(dt) * 101u + shape;
}

TEST(CudaParity, Embedding) {
  LT_REQUIRE_GPU();
  struct Shape {
    int64_t n, d, v;
  };
  const Shape shapes[] = {{1, 1, 1}, {7, 33, 5}, {300, 256, 50}, {2049, 1000, 3001}};
  for (DType dt : kDtypes)
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const auto [N, D, V] = shapes[si];
      const uint64_t seed = seed_of(1, dt, si);
      const ops::EmbeddingParams p{N, D, V};
      std::vector<double> table = random_values(static_cast<size_t>(V * D), seed);
      std::vector<double> dtable = random_values(static_cast<size_t>(V * D), seed + 1);
      std::vector<double> dout = random_values(static_cast<size_t>(N * D), seed + 2);
      std::vector<int32_t> ids = random_ints(static_cast<size_t>(N), seed + 3, 0, int32_t(V));
      DeviceTensor g_table = upload(table, dt, {V, D}), g_dtable = upload(dtable, dt, {V, D});
      DeviceTensor g_dout = upload(dout, dt, {N, D}), g_ids = upload_i32(ids, {N});
      DeviceTensor g_out = poisoned(dt, {N, D});
      ops::embedding_forward(ctx, p, g_out.t, g_ids.t, g_table.t);
      ops::embedding_backward(ctx, p, g_dtable.t, g_dout.t, g_ids.t);

      std::vector<double> out(static_cast<size_t>(N * D));
      Tensor h_ids(ids.data(), DType::I32, {N});
      ops::cpu::embedding_forward(p, host(out, {N, D}), h_ids, host(table, {V, D}));
      ops::cpu::embedding_backward(p, host(dtable, {V, D}), host(dout, {N, D}), h_ids);
      Worst fw, bw;
      fw.add("out", test::download(g_out), out);
      bw.add("dtable", test::download(g_dtable), dtable);
      report("embedding_forward", dt, dims({N, D, V}), fw, 0.0);  // a copy: exact
      report("embedding_backward", dt, dims({N, D, V}), bw, tolerance(dt));
    }
}

TEST(CudaParity, RmsNorm) {
  LT_REQUIRE_GPU();
  struct Shape {
    int64_t n, d;
  };
  // No D = 1: there dx = r w dy eps / (x^2 + eps), a cancellation that no f32 kernel resolves to 1e-5.
  // The register kernels (rmsnorm.cu: D a multiple of the pack, <= 8192 in 16-bit, 4096 in f32) take
  // 256, 896, 1024, 4096 (f32 too) and 8192 (16-bit only; f32 falls back); 2, 257 and 8200 (16-bit: too
  // many packs) take the general kernels. More rows than the kernels' grids make blocks walk several rows.
  // Every kernel variant (rmsnorm_select.h) runs on the same inputs.
  const Shape shapes[] = {{1, 2},   {3, 257},     {64, 4096}, {1000, 896},
                          {5, 256}, {1500, 1024}, {40, 8192}, {24, 8200}};
  for (DType dt : kDtypes)
    for (size_t si = 0; si < std::size(shapes); ++si)
      for (bool accumulate : {false, true}) {
        const auto [N, D] = shapes[si];
        const uint64_t seed = seed_of(2, dt, si * 2 + accumulate);
        const ops::RmsNormParams p{N, D, 1e-5, accumulate};
        std::vector<double> x = random_values(static_cast<size_t>(N * D), seed, -2, 2);
        std::vector<double> w = random_values(static_cast<size_t>(D), seed + 1, 0.5, 1.5);
        std::vector<double> dy = random_values(static_cast<size_t>(N * D), seed + 2);
        std::vector<double> dx = random_values(static_cast<size_t>(N * D), seed + 3);
        std::vector<double> dw = random_values(static_cast<size_t>(D), seed + 4);
        DeviceTensor g_x = upload(x, dt, {N, D}), g_w = upload(w, dt, {D}), g_dy = upload(dy, dt, {N, D});
        const std::vector<double> dx0 = dx, dw0 = dw;  // each variant uploads (rounds) its own copies
        std::vector<double> y(static_cast<size_t>(N * D)), rstd(static_cast<size_t>(N));
        bool reference_done = false;
        for (const test::RmsNormVariant& v : test::kRmsNormVariants) {
          test::RmsNormChoice choice(v);
          std::vector<double> dx_in = dx0, dw_in = dw0;
          DeviceTensor g_dw = upload(dw_in, dt, {D});
          DeviceTensor g_dx = accumulate ? upload(dx_in, dt, {N, D}) : poisoned(dt, {N, D});
          DeviceTensor g_y = poisoned(dt, {N, D}), g_rstd = poisoned(DType::F32, {N});
          ops::rmsnorm_forward(ctx, p, g_y.t, g_rstd.t, g_x.t, g_w.t);
          ops::rmsnorm_backward(ctx, p, g_dx.t, g_dw.t, g_dy.t, g_x.t, g_w.t, g_rstd.t);
          if (!reference_done) {  // from the values rounded by the first uploads
            dx = dx_in;
            dw = dw_in;
            ops::cpu::rmsnorm_forward(p, host(y, {N, D}), host(rstd, {N}), host(x, {N, D}), host(w, {D}));
            ops::cpu::rmsnorm_backward(p, host(dx, {N, D}), host(dw, {D}), host(dy, {N, D}), host(x, {N, D}),
                                       host(w, {D}), host(rstd, {N}));
            reference_done = true;
          }
          Worst fw, bw;
          fw.add("y", test::download(g_y), y);
          fw.add("rstd", test::download(g_rstd), rstd);
          bw.add("dx", test::download(g_dx), dx);
          bw.add("dw", test::download(g_dw), dw);
          const std::string shape = dims({N, D}) + (accumulate ? " dx+=" : "") + v.name;
          // rstd is f32 on the GPU whatever the dtype: hold it to f32's tolerance even for bf16 inputs.
          report("rmsnorm_forward", dt, shape, fw, tolerance(dt));
          report("rmsnorm_backward", dt, shape, bw, tolerance(dt));
          Worst rs;
          rs.add("rstd", test::download(g_rstd), rstd);
          report("rmsnorm_forward.rstd", dt, shape, rs, tolerance(DType::F32));
        }
      }
}

TEST(CudaParity, Linear) {
  LT_REQUIRE_GPU();
  struct Shape {
    int64_t m, k, n;
  };
  const Shape shapes[] = {{1, 1, 1}, {7, 33, 65}, {128, 512, 256}, {300, 1000, 77}, {1, 4096, 3}};
  struct Variant {
    bool bias;
    double scale;
    bool acc;
    const char* name;
    bool residual = false;  // y = residual + ... (the GEMM reads the residual as C)
  };
  const Variant variants[] = {{false, 1.0, false, ""},
                              {true, 1.0, false, " bias"},
                              {true, 2.0, true, " bias*2 +="},
                              {false, 0.5, true, " *0.5 +="},
                              {false, 1.0, false, " +residual", true},
                              {true, 2.0, false, " bias*2 +residual", true}};
  for (DType dt : kDtypes)
    for (size_t si = 0; si < std::size(shapes); ++si)
      for (size_t vi = 0; vi < std::size(variants); ++vi) {
        const auto [M, K, N] = shapes[si];
        const Variant& var = variants[vi];
        const uint64_t seed = seed_of(3, dt, si * 8 + vi);
        const ops::LinearParams p{M, K, N, var.scale, var.acc, var.acc};
        std::vector<double> r = random_values(static_cast<size_t>(M * N), seed + 8);
        std::vector<double> x = random_values(static_cast<size_t>(M * K), seed);
        std::vector<double> w = random_values(static_cast<size_t>(N * K), seed + 1);
        std::vector<double> b = random_values(static_cast<size_t>(N), seed + 2);
        std::vector<double> y = random_values(static_cast<size_t>(M * N), seed + 3);
        std::vector<double> dy = random_values(static_cast<size_t>(M * N), seed + 4);
        std::vector<double> dx = random_values(static_cast<size_t>(M * K), seed + 5);
        std::vector<double> dw = random_values(static_cast<size_t>(N * K), seed + 6);
        std::vector<double> db = random_values(static_cast<size_t>(N), seed + 7);
        DeviceTensor g_x = upload(x, dt, {M, K}), g_w = upload(w, dt, {N, K}), g_b = upload(b, dt, {N});
        DeviceTensor g_dy = upload(dy, dt, {M, N}), g_dw = upload(dw, dt, {N, K}), g_db = upload(db, dt, {N});
        DeviceTensor g_y = var.acc ? upload(y, dt, {M, N}) : poisoned(dt, {M, N});
        DeviceTensor g_dx = var.acc ? upload(dx, dt, {M, K}) : poisoned(dt, {M, K});
        Tensor bias = var.bias ? g_b.t : Tensor();
        DeviceTensor g_r = upload(r, dt, {M, N});
        ops::linear_forward(ctx, p, g_y.t, g_x.t, g_w.t, bias, var.residual ? g_r.t : Tensor());
        ops::linear_backward(ctx, p, g_dx.t, g_dw.t, var.bias ? g_db.t : Tensor(), g_dy.t, g_x.t, g_w.t);

        Tensor h_bias = var.bias ? host(b, {N}) : Tensor();
        ops::cpu::linear_forward(p, host(y, {M, N}), host(x, {M, K}), host(w, {N, K}), h_bias,
                                 var.residual ? host(r, {M, N}) : Tensor());
        ops::cpu::linear_backward(p, host(dx, {M, K}), host(dw, {N, K}), var.bias ? host(db, {N}) : Tensor(),
                                  host(dy, {M, N}), host(x, {M, K}), host(w, {N, K}));
        Worst fw, bw;
        fw.add("y", test::download(g_y), y);
        bw.add("dx", test::download(g_dx), dx);
        bw.add("dw", test::download(g_dw), dw);
        if (var.bias) bw.add("dbias", test::download(g_db), db);
        const std::string shape = dims({M, K, N}) + var.name;
        report("linear_forward", dt, shape, fw, tolerance(dt));
        report("linear_backward", dt, shape, bw, tolerance(dt));
      }
}

TEST(CudaParity, Rope) {
  LT_REQUIRE_GPU();
  struct Shape {
    int64_t n, h, hd;
    int32_t max_pos;
    bool llama3;
    int64_t rotary_dim = 0;  // 0: all of hd
  };
  const Shape shapes[] = {
      {5, 3, 2, 10, false},         {37, 4, 64, 4096, false},
      {256, 8, 128, 131072, true},  {19, 5, 96, 70000, true},
      {23, 6, 96, 9000, false, 72}, {7, 3, 10, 500, false, 6}};  // partial rotary (Phi-4-mini: 96 of 128)
  for (DType dt : kDtypes)
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const Shape& s = shapes[si];
      const int64_t N = s.n, H = s.h, HD = s.hd;
      const uint64_t seed = seed_of(4, dt, si);
      ops::RopeParams p{N, H, HD, s.llama3 ? 500000.0 : 10000.0};
      p.rotary_dim = s.rotary_dim;
      if (s.llama3) {
        p.type = ops::RopeType::Llama3;
        p.factor = 8.0;
      }
      std::vector<double> x = random_values(static_cast<size_t>(N * H * HD), seed);
      std::vector<double> dx = random_values(static_cast<size_t>(N * H * HD), seed + 1);
      std::vector<int32_t> pos = random_ints(static_cast<size_t>(N), seed + 2, 0, s.max_pos);
      DeviceTensor g_x = upload(x, dt, {N, H, HD}), g_dx = upload(dx, dt, {N, H, HD});
      DeviceTensor g_pos = upload_i32(pos, {N});
      ops::rope_forward(ctx, p, g_x.t, g_pos.t);
      ops::rope_backward(ctx, p, g_dx.t, g_pos.t);
      Tensor h_pos(pos.data(), DType::I32, {N});
      ops::cpu::rope_forward(p, host(x, {N, H, HD}), h_pos);
      ops::cpu::rope_backward(p, host(dx, {N, H, HD}), h_pos);
      Worst fw, bw;
      fw.add("x", test::download(g_x), x);
      bw.add("dx", test::download(g_dx), dx);
      const std::string shape = dims({N, H, HD}) + (s.llama3 ? " llama3" : "") +
                                (s.rotary_dim ? " rotary_dim " + std::to_string(s.rotary_dim) : "");
      report("rope_forward", dt, shape, fw, tolerance(dt));
      report("rope_backward", dt, shape, bw, tolerance(dt));
    }
}

// LongRoPE (Phi-3): the factor set follows the call's largest position against original_max_position (4096
// here: the first case stays short, the second goes long), cos/sin scaled by attention_factor; partial rotary
// as Phi-4-mini (96 of 128). The CPU reference goes through the same dispatch (ops::rope_forward on host
// tensors), which picks the factor set the same way.
TEST(CudaParity, RopeLongrope) {
  LT_REQUIRE_GPU();
  constexpr int64_t N = 23, H = 4, HD = 128, R = 96;
  for (DType dt : kDtypes)
    for (int32_t max_pos : {4000, 9000}) {
      const uint64_t seed = seed_of(14, dt, size_t(max_pos));
      ops::RopeParams p{N, H, HD, 10000.0};
      p.rotary_dim = R;
      p.type = ops::RopeType::LongRope;
      p.original_max_position = 4096;
      p.short_factor = random_values(R / 2, seed + 3, 1.0, 3.0);
      p.long_factor = random_values(R / 2, seed + 4, 1.0, 64.0);
      p.attention_factor = 1.1902380714238083;
      std::vector<double> x = random_values(static_cast<size_t>(N * H * HD), seed);
      std::vector<double> dx = random_values(static_cast<size_t>(N * H * HD), seed + 1);
      std::vector<int32_t> pos = random_ints(static_cast<size_t>(N), seed + 2, 0, max_pos);
      DeviceTensor g_x = upload(x, dt, {N, H, HD}), g_dx = upload(dx, dt, {N, H, HD});
      DeviceTensor g_pos = upload_i32(pos, {N});
      ops::rope_forward(ctx, p, g_x.t, g_pos.t);
      ops::rope_backward(ctx, p, g_dx.t, g_pos.t);
      Tensor h_pos(pos.data(), DType::I32, {N});
      ops::rope_forward(ctx, p, host(x, {N, H, HD}), h_pos);
      ops::rope_backward(ctx, p, host(dx, {N, H, HD}), h_pos);
      Worst fw, bw;
      fw.add("x", test::download(g_x), x);
      bw.add("dx", test::download(g_dx), dx);
      const std::string shape = dims({N, H, HD}) + " longrope max position " + std::to_string(max_pos);
      report("rope_forward", dt, shape, fw, tolerance(dt));
      report("rope_backward", dt, shape, bw, tolerance(dt));
    }
}

TEST(CudaParity, SwigluAndAdd) {
  LT_REQUIRE_GPU();
  struct Shape {
    int64_t n, f;
  };
  const Shape shapes[] = {{1, 1}, {3, 5}, {128, 1001}, {64, 14336}};
  for (DType dt : kDtypes)
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const auto [N, F] = shapes[si];
      const uint64_t seed = seed_of(5, dt, si);
      const ops::SwigluParams p{N, F};
      std::vector<double> g = random_values(static_cast<size_t>(N * F), seed, -6, 6);
      std::vector<double> u = random_values(static_cast<size_t>(N * F), seed + 1, -3, 3);
      std::vector<double> dh = random_values(static_cast<size_t>(N * F), seed + 2);
      DeviceTensor g_g = upload(g, dt, {N, F}), g_u = upload(u, dt, {N, F}), g_dh = upload(dh, dt, {N, F});
      DeviceTensor g_h = poisoned(dt, {N, F}), g_dg = poisoned(dt, {N, F}), g_du = poisoned(dt, {N, F});
      ops::swiglu_forward(ctx, p, g_h.t, g_g.t, g_u.t);
      ops::swiglu_backward(ctx, p, g_dg.t, g_du.t, g_dh.t, g_g.t, g_u.t);
      std::vector<double> h(static_cast<size_t>(N * F)), dg(static_cast<size_t>(N * F)),
          du(static_cast<size_t>(N * F));
      ops::cpu::swiglu_forward(p, host(h, {N, F}), host(g, {N, F}), host(u, {N, F}));
      ops::cpu::swiglu_backward(p, host(dg, {N, F}), host(du, {N, F}), host(dh, {N, F}), host(g, {N, F}),
                                host(u, {N, F}));
      Worst fw, bw;
      fw.add("h", test::download(g_h), h);
      bw.add("dgate", test::download(g_dg), dg);
      bw.add("dup", test::download(g_du), du);
      report("swiglu_forward", dt, dims({N, F}), fw, tolerance(dt));
      report("swiglu_backward", dt, dims({N, F}), bw, tolerance(dt));

      // The residual add on the same shapes: y += x.
      std::vector<double> y = random_values(static_cast<size_t>(N * F), seed + 3);
      std::vector<double> x = random_values(static_cast<size_t>(N * F), seed + 4);
      DeviceTensor g_y = upload(y, dt, {N, F}), g_x = upload(x, dt, {N, F});
      ops::add_inplace(ctx, g_y.t, g_x.t);
      ops::cpu::add_inplace(host(y, {N, F}), host(x, {N, F}));
      Worst ad;
      ad.add("y", test::download(g_y), y);
      report("add_inplace", dt, dims({N, F}), ad, tolerance(dt));
    }
}

// Casts must give exactly the CPU's bits (both round to nearest even through core/dtype.h's rules).
TEST(CudaParity, Cast) {
  LT_REQUIRE_GPU();
  const DType types[] = {DType::F64, DType::F32, DType::BF16, DType::F16};
  const int64_t counts[] = {1, 1001, 65537};
  for (DType src_dt : types)
    for (DType dst_dt : types)
      for (size_t ci = 0; ci < std::size(counts); ++ci) {
        const int64_t n = counts[ci];
        // Values over many binades, plus some beyond f16's range and below its normal range.
        std::vector<double> v =
            random_values(static_cast<size_t>(n), seed_of(6, src_dt, ci * 16 + uint64_t(dst_dt)), -1, 1);
        for (size_t i = 0; i < v.size(); ++i) v[i] = v[i] * std::pow(2.0, double(int(i % 41) - 25));
        DeviceTensor g_src = upload(v, src_dt, {n});
        DeviceTensor g_dst = poisoned(dst_dt, {n});
        ops::cast(ctx, g_dst.t, g_src.t);
        std::vector<char> src_bytes(static_cast<size_t>(n) * dtype_size(src_dt)),
            dst_bytes(static_cast<size_t>(n) * dtype_size(dst_dt));
        convert_elements(src_bytes.data(), src_dt, v.data(), DType::F64, v.size());
        ops::cpu::cast(Tensor(dst_bytes.data(), dst_dt, {n}), Tensor(src_bytes.data(), src_dt, {n}));
        std::vector<double> ref(static_cast<size_t>(n));
        convert_elements(ref.data(), DType::F64, dst_bytes.data(), dst_dt, ref.size());
        Worst w;
        w.add("dst", test::download(g_dst), ref);
        report("cast", dst_dt,
               std::string(dtype_name(src_dt)) + "->" + std::string(dtype_name(dst_dt)) + " " + dims({n}), w,
               0.0);
      }
}

TEST(CudaParity, CrossEntropy) {
  LT_REQUIRE_GPU();
  struct Shape {
    int64_t n, v;
    double scale;
  };
  const Shape shapes[] = {{1, 1, 1}, {7, 33, 4}, {64, 32000, 8}, {17, 128256, 30}};
  for (DType dt : kDtypes)
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const auto [N, V, scale] = shapes[si];
      const uint64_t seed = seed_of(7, dt, si);
      ops::CrossEntropyParams p{N, V, -100, 1.0 / double(N)};
      std::vector<double> z = random_values(static_cast<size_t>(N * V), seed, -scale, scale);
      std::vector<int32_t> labels = random_ints(static_cast<size_t>(N), seed + 1, 0, int32_t(V));
      for (size_t i = 3; i < labels.size(); i += 4) labels[i] = -100;  // some ignored rows
      DeviceTensor g_z = upload(z, dt, {N, V}), g_labels = upload_i32(labels, {N});
      DeviceTensor g_losses = poisoned(DType::F32, {N}), g_lse = poisoned(DType::F32, {N});
      DeviceTensor g_dz = poisoned(dt, {N, V});
      const double total = ops::cross_entropy_forward(ctx, p, g_losses.t, g_lse.t, g_z.t, g_labels.t);
      ops::cross_entropy_backward(ctx, p, g_dz.t, g_z.t, g_lse.t, g_labels.t);

      std::vector<double> losses(static_cast<size_t>(N)), lse(static_cast<size_t>(N)),
          dz(static_cast<size_t>(N * V));
      Tensor h_labels(labels.data(), DType::I32, {N});
      const double ref_total =
          ops::cpu::cross_entropy_forward(p, host(losses, {N}), host(lse, {N}), host(z, {N, V}), h_labels);
      ops::cpu::cross_entropy_backward(p, host(dz, {N, V}), host(z, {N, V}), host(lse, {N}), h_labels);
      // losses, lse and the total are f32 on the GPU whatever the dtype of the logits.
      Worst fw, bw;
      fw.add("losses", test::download(g_losses), losses);
      fw.add("lse", test::download(g_lse), lse);
      fw.add("total", {total}, {ref_total});
      bw.add("dlogits", test::download(g_dz), dz);
      report("cross_entropy_forward", dt, dims({N, V}), fw, tolerance(DType::F32));
      report("cross_entropy_backward", dt, dims({N, V}), bw, tolerance(dt));
    }
}

// Views that start one element into their buffer are not 16-byte aligned: the elementwise kernels must take
// their element-by-element path and still match the reference.
TEST(CudaParity, MisalignedElementwise) {
  LT_REQUIRE_GPU();
  for (DType dt : kDtypes) {
    const int64_t n = 1037;
    std::vector<double> g = random_values(static_cast<size_t>(n + 1), seed_of(8, dt, 0), -4, 4);
    std::vector<double> u = random_values(static_cast<size_t>(n + 1), seed_of(8, dt, 1));
    DeviceTensor g_g = upload(g, dt, {n + 1}), g_u = upload(u, dt, {n + 1});
    DeviceTensor g_h = poisoned(dt, {n + 1});
    auto view = [&](const DeviceTensor& d) {
      return Tensor(static_cast<char*>(d.t.data) + dtype_size(dt), dt, {1, n}, Device::CUDA);
    };
    ops::swiglu_forward(ctx, {1, n}, view(g_h), view(g_g), view(g_u));
    ops::add_inplace(ctx, view(g_u), view(g_g));
    std::vector<double> h(static_cast<size_t>(n)), gv(g.begin() + 1, g.end()), uv(u.begin() + 1, u.end());
    ops::cpu::swiglu_forward({1, n}, host(h, {1, n}), host(gv, {1, n}), host(uv, {1, n}));
    ops::cpu::add_inplace(host(uv, {1, n}), host(gv, {1, n}));
    std::vector<double> out_h = test::download(g_h), out_u = test::download(g_u);
    Worst w;
    w.add("h", std::vector<double>(out_h.begin() + 1, out_h.end()), h);
    w.add("y", std::vector<double>(out_u.begin() + 1, out_u.end()), uv);
    report("swiglu_fwd+add misaligned", dt, dims({1, n}), w, tolerance(dt));
  }
}

}  // namespace
}  // namespace lt::test
