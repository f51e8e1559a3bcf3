// RMS normalization as XLA FFI handlers: y = x / sqrt(mean(x^2) + eps) over the last axis.
// Three handlers: RmsNorm (y), RmsNormFwd (y and the scale 1/sqrt(...) per row, the residual
// the backward pass needs) and RmsNormBwd (the cotangent of x from the residual, x and the
// cotangent of y). Leading axes are a batch: each handler loops over the rows.
#include <cmath>
#include <cstdint>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// One row of `n` floats: writes y = x * scale and returns scale.
static float NormalizeRow(float eps, int64_t n, const float* x, float* y) {
  float sum_sq = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum_sq += x[i] * x[i];
  float scale = 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  return scale;
}

// The length of the last axis, or 0 for a scalar (which the handlers refuse).
static int64_t RowLength(const ffi::Buffer<ffi::F32>& x) {
  auto dims = x.dimensions();
  return dims.size() == 0 ? 0 : dims.back();
}

static ffi::Error RmsNormImpl(float eps, ffi::Buffer<ffi::F32> x,
                              ffi::ResultBuffer<ffi::F32> y) {
  int64_t n = RowLength(x);
  if (n == 0) return ffi::Error::InvalidArgument("rms_norm: the input must have an axis");
  for (int64_t start = 0; start < x.element_count(); start += n)
    NormalizeRow(eps, n, x.typed_data() + start, y->typed_data() + start);
  return ffi::Error::Success();
}

static ffi::Error RmsNormFwdImpl(float eps, ffi::Buffer<ffi::F32> x,
                                 ffi::ResultBuffer<ffi::F32> y,
                                 ffi::ResultBuffer<ffi::F32> scale) {
  int64_t n = RowLength(x);
  if (n == 0) return ffi::Error::InvalidArgument("rms_norm_fwd: the input must have an axis");
  for (int64_t row = 0, start = 0; start < x.element_count(); ++row, start += n)
    scale->typed_data()[row] =
        NormalizeRow(eps, n, x.typed_data() + start, y->typed_data() + start);
  return ffi::Error::Success();
}

// With y = x * s and s = (mean(x^2) + eps)^(-1/2):
//   ct_x = s * ct_y - x * s^3 / n * sum(x * ct_y)
static ffi::Error RmsNormBwdImpl(ffi::Buffer<ffi::F32> scale, ffi::Buffer<ffi::F32> x,
                                 ffi::Buffer<ffi::F32> ct_y,
                                 ffi::ResultBuffer<ffi::F32> ct_x) {
  int64_t n = RowLength(x);
  if (n == 0) return ffi::Error::InvalidArgument("rms_norm_bwd: the input must have an axis");
  for (int64_t row = 0, start = 0; start < x.element_count(); ++row, start += n) {
    const float* xr = x.typed_data() + start;
    const float* gr = ct_y.typed_data() + start;
    float s = scale.typed_data()[row], dot = 0.0f;
    for (int64_t i = 0; i < n; ++i) dot += xr[i] * gr[i];
    float k = s * s * s * dot / static_cast<float>(n);
    for (int64_t i = 0; i < n; ++i) ct_x->typed_data()[start + i] = s * gr[i] - k * xr[i];
  }
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(RmsNorm, RmsNormImpl,
                              ffi::Ffi::Bind()
                                  .Attr<float>("eps")
                                  .Arg<ffi::Buffer<ffi::F32>>()   // x
                                  .Ret<ffi::Buffer<ffi::F32>>());  // y

XLA_FFI_DEFINE_HANDLER_SYMBOL(RmsNormFwd, RmsNormFwdImpl,
                              ffi::Ffi::Bind()
                                  .Attr<float>("eps")
                                  .Arg<ffi::Buffer<ffi::F32>>()   // x
                                  .Ret<ffi::Buffer<ffi::F32>>()   // y
                                  .Ret<ffi::Buffer<ffi::F32>>());  // scale, one per row

XLA_FFI_DEFINE_HANDLER_SYMBOL(RmsNormBwd, RmsNormBwdImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()   // scale
                                  .Arg<ffi::Buffer<ffi::F32>>()   // x
                                  .Arg<ffi::Buffer<ffi::F32>>()   // ct_y
                                  .Ret<ffi::Buffer<ffi::F32>>());  // ct_x
