"""bitsandbytes on the CPU, made to compute what its CUDA kernels compute (imported by the 4-bit tools).

bitsandbytes' CPU backend registers, for the cpu device, a native quantize_blockwise that rounds through a
65536-entry lookup table; its torch reference kernel (backends/default/ops.py, the "default" registration)
rounds to the nearest map value as the CUDA kernel's search does. double quantization (the nested 8-bit
scales) goes through quantize_blockwise, so the tools register the reference kernel for the cpu device.
"""
import gc
import inspect

import torch

import bitsandbytes  # noqa: F401  (registers the backends)


def reference_kernel(op):
    """bitsandbytes' torch reference kernel of `op` (its "default" registration in backends/default/ops.py)."""
    for obj in gc.get_objects():
        if inspect.isfunction(obj) and obj.__module__ == "bitsandbytes.backends.default.ops" and obj.__name__ == "_":
            try:
                src = inspect.getsource(obj)
            except OSError:
                continue
            if f'"bitsandbytes::{op}", "default"' in src:
                return obj
    raise RuntimeError(f"bitsandbytes' reference {op} kernel not found")


def reference_quantize_blockwise():
    return reference_kernel("quantize_blockwise")


def use_reference_nested_quantization():
    torch.library.register_kernel("bitsandbytes::quantize_blockwise", "cpu", reference_quantize_blockwise())


def use_reference_dequantize_4bit():
    """bitsandbytes' native CPU dequantize_4bit cuts the codes into rows of the weight's last dimension and
    takes blocks within a row; its CUDA kernel (and its torch reference) take blocks of the flattened weight,
    as quantization did. The two agree only when a row is a whole number of blocks (in_features a multiple of
    64); for smaller rows the CPU kernel scales codes with the wrong block's absmax. The tools register the
    reference kernel for the cpu device, so Linear4bit's forward and dequantize_4bit compute what the CUDA
    kernel computes."""
    torch.library.register_kernel("bitsandbytes::dequantize_4bit", "cpu", reference_kernel("dequantize_4bit"))


def cuda_f32_literal(text):
    """The float an `f`-suffixed C/CUDA literal denotes: the decimal rounded once, to nearest f32 (ties to even);
    Python's float(text) then float32 rounds twice and can land on the other neighbour."""
    import struct
    from fractions import Fraction
    exact = Fraction(text)
    d = float(text)
    lo = struct.unpack("f", struct.pack("f", d))[0]
    cands = {lo, float(torch.tensor(lo).nextafter(torch.tensor(float("inf")))),
             float(torch.tensor(lo).nextafter(torch.tensor(float("-inf"))))}
    best = min(cands, key=lambda c: (abs(Fraction(c) - exact), struct.unpack("I", struct.pack("f", c))[0] & 1))
    return best


# The decision thresholds of bitsandbytes' CUDA kernels (dQuantizeNF4, dQuantizeFP4) as written there.
NF4_CUDA_THRESHOLDS = [cuda_f32_literal(t) for t in (
    "-0.8480964004993439", "-0.6106329262256622", "-0.4599952697753906", "-0.33967943489551544",
    "-0.23460740596055984", "-0.13791173323988914", "-0.045525018125772476", "0.03979014977812767",
    "0.1202552504837513", "0.2035212516784668", "0.2920137718319893", "0.3893125355243683",
    "0.5016634166240692", "0.6427869200706482", "0.8614784181118011")]
FP4_CUDA_THRESHOLDS = [cuda_f32_literal(t) for t in (
    "0.00260417", "0.0859375", "0.20833333", "0.29166667", "0.4166667", "0.583333", "0.8333333")]
FP4_CODE_BY_RANK = [0b000, 0b001, 0b110, 0b111, 0b100, 0b101, 0b010, 0b011]


def _windows(values, thresholds, mids):
    """Values between or on a CUDA threshold and the CPU reference's midpoint."""
    hit = torch.zeros_like(values, dtype=torch.bool)
    for t, mid in zip(thresholds, mids.tolist()):
        hit |= (values >= min(t, mid)) & (values <= max(t, mid))
    return hit


def nf4_cuda_codes(codes, x_scaled):
    """bitsandbytes' CPU reference bucketizes NF4 at f32 midpoints of its table; the CUDA kernel compares with
    its own f32 literals, a few of which are the midpoint's neighbour. Values between or on the two get the
    CUDA kernel's code. Returns the codes and how many changed."""
    import bitsandbytes.functional as F
    table = F.get_4bit_type("nf4", device="cpu")
    mids = (table[:-1] + table[1:]) / 2
    cuda = (x_scaled.unsqueeze(1) > torch.tensor(NF4_CUDA_THRESHOLDS)).sum(dim=1).to(codes.dtype)
    fixed = torch.where(_windows(x_scaled, NF4_CUDA_THRESHOLDS, mids), cuda, codes)
    return fixed, int((fixed != codes).sum())


# FP4's decision thresholds in bitsandbytes' CUDA kernel (dQuantizeFP4) differ slightly from the midpoints
# its CPU reference bucketizes with (0.583333 vs 0.58333337, ...), and the two break ties differently: CUDA
# tests the magnitude (a tie goes to the smaller magnitude), the CPU the signed value (a tie goes to the
# lower value, the larger magnitude for a negative one). A scaled magnitude between or on the two gets
# different codes: the tools give those values (rare) the CUDA kernel's code and count them.


def fp4_cuda_zero_codes(codes, x_scaled):
    """bitsandbytes' CPU reference holds FP4 codes 0 and 8 as the same +0.0 and returns either for a value in
    the zero bucket; the CUDA kernel gives the sign bit (code 8) to negative values and code 0 to the rest.
    Values between or on a CUDA threshold and the CPU midpoint get the CUDA kernel's code. Returns the codes and
    how many changed."""
    zero_bucket = (codes == 0) | (codes == 8)
    sign = torch.where(x_scaled < 0, 8, 0).to(codes.dtype)
    fixed = torch.where(zero_bucket, sign, codes)
    code = torch.tensor([0.0, 0.0052083334885537624, 0.1666666716337204, 0.25, 0.3333333432674408, 0.5,
                         0.6666666865348816, 1.0])
    mids = (code[:-1] + code[1:]) / 2
    m = x_scaled.abs()
    thresholds = torch.tensor(FP4_CUDA_THRESHOLDS)
    rank = (m.unsqueeze(1) > thresholds).sum(dim=1)
    cuda = torch.tensor(FP4_CODE_BY_RANK, dtype=codes.dtype)[rank] + sign
    fixed = torch.where(_windows(m, FP4_CUDA_THRESHOLDS, mids), cuda, fixed)
    return fixed, int((fixed != codes).sum())
