// _torch_ops.cpp - norm_opt's backward ops as C++ kernels of the dispatcher.
//
// Part of norm-opt's Python package. norm_opt/torch.py defines the schemas
// of norm_opt::layer_norm_backward / rms_norm_backward (and their fake
// kernels); this file, built against the user's torch on first use
// (torch.utils.cpp_extension), registers their CUDA kernels. A call then
// costs what the launcher costs plus a few allocations: no Python runs.
//
// The launchers come from norm-opt's compiled libraries, loaded by Python
// (norm_opt.kernels): the first call of a (kind, N, dtypes, device) asks
// Python for them (the resolver registered below) and keeps the function
// pointers. Inside a CUDA graph capture the fp32 workspace comes from
// torch's allocator (the graph's pool): the runtime asks for it through the
// allocator each library is given (normrt_set_capture_allocator), so a call
// needs no capture check of its own.

#include "_launchers.h"

#include <torch/extension.h>

#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace {

// The C ABI of the launchers (_launchers.h).
using norm_opt_launchers::LayerLauncher;
using norm_opt_launchers::RmsLauncher;
using CaptureAllocFn = int (*)(void *, void *, size_t, void **);
using SetCaptureAllocatorFn = int (*)(CaptureAllocFn, void *);
using norm_opt_launchers::LastErrorFn;

struct Kernel {
  void *launcher = nullptr;
  LastErrorFn lastError = nullptr;
};

// (kind, N, x dtype, weight dtype, device) -> its kernel.
using KernelKey = std::tuple<int, int64_t, int, int, int>;

std::mutex gMutex;
std::map<KernelKey, Kernel> gKernels;
// The libraries (their normrt_set_capture_allocator) given our allocator.
std::set<SetCaptureAllocatorFn> gAllocatorSet;
// Python: (kind, n, dtype, wdtype, device) -> None. Never freed: it may not
// be released after the interpreter.
pybind11::object *gResolver = nullptr;
std::atomic<int64_t> gLaunches{0};
std::atomic<int64_t> gCaptureWorkspaces{0}; // allocateForCapture's buffers

constexpr int kLayer = 0, kRms = 1;

const Kernel &kernelFor(int kind, int64_t n, at::ScalarType x,
                        at::ScalarType w, int device) {
  KernelKey key{kind, n, int(x), int(w), device};
  {
    std::lock_guard<std::mutex> lock(gMutex);
    auto it = gKernels.find(key);
    if (it != gKernels.end())
      return it->second;
  }
  // Python loads (or compiles) the library and calls register_kernel.
  {
    pybind11::gil_scoped_acquire gil;
    TORCH_CHECK(gResolver, "norm_opt: the kernel resolver is not set");
    (*gResolver)(kind == kLayer ? "layer" : "rms", n,
              c10::toString(x), c10::toString(w), device);
  }
  std::lock_guard<std::mutex> lock(gMutex);
  auto it = gKernels.find(key);
  TORCH_CHECK(it != gKernels.end(), "norm_opt: no kernel registered for ",
              kind == kLayer ? "layer" : "rms", " N=", n);
  return it->second;
}

// The workspaces torch's allocator gave this thread's current call during
// a capture; freed (back to the graph's pool) when the launcher returns.
thread_local std::vector<at::Tensor> tCaptureWorkspaces;

/// normrt_capture_alloc_fn: a workspace from torch's caching allocator on
/// the current (capturing) stream, so it comes from the graph's pool. No
/// exception may cross the runtime's C frames.
int allocateForCapture(void *, void *, size_t bytes, void **ptr) {
  try {
    at::Tensor t = at::empty(
        {int64_t(bytes)},
        at::TensorOptions().dtype(at::kByte).device(
            at::kCUDA, c10::cuda::current_device()));
    *ptr = t.data_ptr();
    tCaptureWorkspaces.push_back(std::move(t));
    ++gCaptureWorkspaces;
    return 0;
  } catch (...) {
    return 1;
  }
}

void registerKernel(int64_t kind, int64_t n, const std::string &x,
                    const std::string &w, int64_t device, uintptr_t launcher,
                    uintptr_t setCaptureAllocator, uintptr_t lastError) {
  auto type = [](const std::string &name) {
    for (at::ScalarType t : {at::kFloat, at::kHalf, at::kBFloat16})
      if (name == c10::toString(t))
        return t;
    TORCH_CHECK(false, "norm_opt: unsupported dtype ", name);
  };
  Kernel k;
  k.launcher = reinterpret_cast<void *>(launcher);
  k.lastError = reinterpret_cast<LastErrorFn>(lastError);
  std::lock_guard<std::mutex> lock(gMutex);
  // Each library has its own runtime: each is given the allocator once (a
  // library without it records its own allocation in the graph instead).
  auto setAllocator = reinterpret_cast<SetCaptureAllocatorFn>(
      setCaptureAllocator);
  if (setAllocator && gAllocatorSet.insert(setAllocator).second)
    TORCH_CHECK(setAllocator(&allocateForCapture, nullptr) == 0,
                "norm_opt: normrt_set_capture_allocator failed: ",
                k.lastError ? k.lastError() : "");
  gKernels[KernelKey{int(kind), n, int(type(x)), int(type(w)), int(device)}] =
      k;
}

/// `t` as [rows, n] with unit stride along n and one row stride >= n.
/// The one row stride (elements) of `t` read as [rows, n]: unit stride
/// along n and leading dims that collapse; -1 where they do not.
int64_t rowStride(const at::Tensor &t, int64_t n) {
  int64_t dims = t.dim();
  if (n > 1 && t.stride(dims - 1) != 1)
    return -1;
  int64_t row = -1, expected = -1;
  for (int64_t d = dims - 2; d >= 0; --d) {
    if (t.size(d) == 1)
      continue;
    if (row < 0)
      row = expected = t.stride(d);
    else if (t.stride(d) != expected)
      return -1;
    expected *= t.size(d);
  }
  if (row < 0) // at most one row: any stride will do
    return n;
  return row >= n ? row : -1;
}

/// `t` itself where it reads as [rows, n] with one row stride (no view is
/// made: a call runs as few torch ops as it can), else a contiguous copy;
/// and that stride.
std::pair<at::Tensor, int64_t> asRows(const at::Tensor &t, int64_t n) {
  int64_t stride = rowStride(t, n);
  if (stride >= 0)
    return {t, stride};
  return {t.contiguous(), n};
}

/// An uninitialised contiguous tensor of `sizes` with the dtype and device
/// of `like`, made by the CUDA allocator directly: at::empty is an op of
/// its own, a dispatch and (under torch's profiler) an event per call.
at::Tensor emptyCuda(at::IntArrayRef sizes, const at::Tensor &like) {
  return at::Tensor(at::detail::empty_cuda(sizes, like.scalar_type(),
                                           like.device(), c10::nullopt));
}

/// Per-row fp32 statistics, contiguous.
at::Tensor stats(const at::Tensor &t, int64_t rows, const char *what) {
  TORCH_CHECK(t.numel() == rows, "norm_opt: ", what, " has ", t.numel(),
              " elements, expected one per row (", rows, ")");
  if (t.scalar_type() == at::kFloat && t.is_contiguous())
    return t;
  return t.to(at::kFloat).contiguous();
}

/// Runs `launch(stream)`; raises with the runtime's message on failure.
/// Eager calls use the runtime's own workspace (kept per context and
/// stream: no allocation per call); during a capture the runtime asks
/// allocateForCapture, whose buffers are released here.
template <typename Launch>
void run(const Kernel &k, const char *op, cudaStream_t stream,
         Launch &&launch) {
  int status = launch(stream);
  tCaptureWorkspaces.clear();
  TORCH_CHECK(status == 0, op, ": ", k.lastError());
  ++gLaunches;
}

void checkCommon(const char *op, const at::Tensor &dy, const at::Tensor &x,
                 const at::Tensor &weight) {
  TORCH_CHECK(x.is_cuda() && x.dim() >= 1, op, ": x must be a CUDA tensor");
  TORCH_CHECK(dy.sizes() == x.sizes(), op, ": dy has shape ", dy.sizes(),
              " but x has ", x.sizes());
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1), op,
              ": weight must have shape [", x.size(-1), "]");
  TORCH_CHECK(dy.device() == x.device() && weight.device() == x.device(), op,
              ": all tensors must be on one device");
}

/// What both backward ops share: the checks, the device, the [rows, n]
/// views of dy and x, the weight, dx and dW, the row strides.
struct Rows {
  c10::cuda::CUDAGuard guard;
  int64_t n, rows;
  at::Tensor x, dy, w, dx, dw;
  int64_t dyStride, xStride;

  Rows(const char *op, const at::Tensor &dy_, const at::Tensor &x_,
       const at::Tensor &weight_)
      : guard((checkCommon(op, dy_, x_, weight_), x_.device())) {
    n = x_.size(-1);
    rows = n ? x_.numel() / n : 0;
    std::tie(x, xStride) = asRows(x_, n);
    std::tie(dy, dyStride) = asRows(
        dy_.scalar_type() == x_.scalar_type() ? dy_ : dy_.to(x_.scalar_type()),
        n);
    w = weight_.is_contiguous() ? weight_ : weight_.contiguous();
    dx = emptyCuda(x_.sizes(), x_);
    dw = emptyCuda(w.sizes(), w);
  }
  const Kernel &kernel(int kind) const {
    return kernelFor(kind, n, x.scalar_type(), w.scalar_type(),
                     x.get_device());
  }
};

std::tuple<at::Tensor, at::Tensor, at::Tensor>
layerNormBackward(const at::Tensor &dy_, const at::Tensor &x_,
                  const at::Tensor &mean_, const at::Tensor &rstd_,
                  const at::Tensor &weight_) {
  const char *op = "norm_opt::layer_norm_backward";
  Rows r(op, dy_, x_, weight_);
  at::Tensor mean = stats(mean_, r.rows, "mean");
  at::Tensor rstd = stats(rstd_, r.rows, "rstd");
  at::Tensor db = emptyCuda(r.w.sizes(), r.w);
  const Kernel &k = r.kernel(kLayer);
  auto launcher = reinterpret_cast<LayerLauncher>(k.launcher);
  // bias is not read by the kernel (dbias = sum of dy): pass weight.
  run(k, op, c10::cuda::getCurrentCUDAStream().stream(), [&](cudaStream_t s) {
        return launcher(r.dy.data_ptr(), r.x.data_ptr(), mean.data_ptr(),
                        rstd.data_ptr(), r.w.data_ptr(), r.w.data_ptr(),
                        r.dx.data_ptr(), r.dw.data_ptr(), db.data_ptr(),
                        r.rows, r.n, r.dyStride, r.xStride, r.n, s);
      });
  return {r.dx, r.dw, db};
}

std::tuple<at::Tensor, at::Tensor>
rmsNormBackward(const at::Tensor &dy_, const at::Tensor &x_,
                const at::Tensor &rstd_, const at::Tensor &weight_) {
  const char *op = "norm_opt::rms_norm_backward";
  Rows r(op, dy_, x_, weight_);
  at::Tensor rstd = stats(rstd_, r.rows, "rstd");
  const Kernel &k = r.kernel(kRms);
  auto launcher = reinterpret_cast<RmsLauncher>(k.launcher);
  run(k, op, c10::cuda::getCurrentCUDAStream().stream(), [&](cudaStream_t s) {
        return launcher(r.dy.data_ptr(), r.x.data_ptr(), rstd.data_ptr(),
                        r.w.data_ptr(), r.dx.data_ptr(), r.dw.data_ptr(),
                        r.rows, r.n, r.dyStride, r.xStride, r.n, s);
      });
  return {r.dx, r.dw};
}

// --- norm_opt::launch: one compiled torch.compile region ---------------
//
// norm_opt.torch's compile route replaces each region of Inductor's graph
// the recognition pass fuses with `launch(key, inputs)`. A region's
// launcher takes the data pointers of its inputs and outputs, then int64
// sizes and strides, then the stream (docs/compile.md). What those ints are
// for one set of shapes, strides and pointer alignments is asked of Python
// once (the library's checked Function.arguments) and kept here.

struct Region {
  void *launcher = nullptr;
  LastErrorFn lastError = nullptr;
  std::string name;
  // Per output: its dtype and, per dim, (input, dim) or (-1, size).
  std::vector<at::ScalarType> outTypes;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> outShapes;
  std::map<std::vector<int64_t>, std::vector<int64_t>> ints;
};

std::map<std::string, Region> gRegions;
pybind11::object *gRegionResolver = nullptr; // (key, tensors) -> [int]

void registerRegion(const std::string &key, const std::string &name,
                    uintptr_t launcher, uintptr_t setCaptureAllocator,
                    uintptr_t lastError, const std::vector<std::string> &types,
                    const std::vector<std::vector<std::pair<int64_t, int64_t>>>
                        &shapes) {
  Region r;
  r.launcher = reinterpret_cast<void *>(launcher);
  r.lastError = reinterpret_cast<LastErrorFn>(lastError);
  r.name = name;
  for (const std::string &t : types) {
    bool found = false;
    for (at::ScalarType s : {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble})
      if (t == c10::toString(s)) {
        r.outTypes.push_back(s);
        found = true;
      }
    TORCH_CHECK(found, "norm_opt: unsupported output dtype ", t);
  }
  r.outShapes = shapes;
  std::lock_guard<std::mutex> lock(gMutex);
  auto setAllocator =
      reinterpret_cast<SetCaptureAllocatorFn>(setCaptureAllocator);
  if (setAllocator && gAllocatorSet.insert(setAllocator).second)
    TORCH_CHECK(setAllocator(&allocateForCapture, nullptr) == 0,
                "norm_opt: normrt_set_capture_allocator failed");
  gRegions.emplace(key, std::move(r)); // a key is one library: kept
}

// Calls a launcher of `sizeof...(I)` integer-class parameters (data
// pointers, int64 sizes and strides, the stream) from an array.
template <size_t... I>
int callWith(void *fn, const uint64_t *a, std::index_sequence<I...>) {
  using F = int (*)(decltype((void)I, uint64_t())...);
  return reinterpret_cast<F>(fn)(a[I]...);
}
template <size_t... N>
constexpr auto makeCallTable(std::index_sequence<N...>) {
  using Call = int (*)(void *, const uint64_t *);
  return std::array<Call, sizeof...(N)>{+[](void *f, const uint64_t *a) {
    return callWith(f, a, std::make_index_sequence<N>());
  }...};
}
constexpr size_t kMaxLauncherParams = 96;
const auto kCallTable =
    makeCallTable(std::make_index_sequence<kMaxLauncherParams + 1>());

std::vector<at::Tensor> launchRegion(c10::string_view key,
                                     at::TensorList inputsIn) {
  Region *r = nullptr;
  for (int attempt = 0; attempt < 2 && !r; ++attempt) {
    {
      std::lock_guard<std::mutex> lock(gMutex);
      auto it = gRegions.find(std::string(key));
      if (it != gRegions.end()) {
        r = &it->second;
        break;
      }
    }
    // A graph from Inductor's cache: Python registers the region from the
    // library cache (no tensors: register only).
    pybind11::gil_scoped_acquire gil;
    TORCH_CHECK(gRegionResolver, "norm_opt: the region resolver is not set");
    (*gRegionResolver)(std::string(key), std::vector<at::Tensor>());
  }
  TORCH_CHECK(r, "norm_opt::launch: no region ", std::string(key));
  TORCH_CHECK(!inputsIn.empty(), "norm_opt::launch: no inputs");
  c10::cuda::CUDAGuard guard(inputsIn[0].device());
  std::vector<at::Tensor> tensors;
  tensors.reserve(inputsIn.size() + r->outTypes.size());
  for (const at::Tensor &t : inputsIn)
    tensors.push_back(t.is_contiguous() ? t : t.contiguous());
  std::vector<at::Tensor> outputs;
  for (size_t o = 0; o < r->outTypes.size(); ++o) {
    std::vector<int64_t> sizes;
    for (auto [input, dim] : r->outShapes[o])
      sizes.push_back(input < 0 ? dim : tensors[input].size(dim));
    outputs.push_back(at::Tensor(at::detail::empty_cuda(
        sizes, r->outTypes[o], tensors[0].device(), c10::nullopt)));
    tensors.push_back(outputs.back());
  }
  std::vector<int64_t> shapeKey;
  for (const at::Tensor &t : tensors) {
    shapeKey.push_back(t.dim());
    for (int64_t d = 0; d < t.dim(); ++d)
      shapeKey.push_back(t.size(d));
    shapeKey.push_back(int64_t(reinterpret_cast<uintptr_t>(t.data_ptr()) & 15));
  }
  const std::vector<int64_t> *ints;
  {
    std::unique_lock<std::mutex> lock(gMutex);
    auto it = r->ints.find(shapeKey);
    if (it == r->ints.end()) {
      lock.unlock();
      std::vector<int64_t> got;
      {
        pybind11::gil_scoped_acquire gil;
        TORCH_CHECK(gRegionResolver, "norm_opt: the region resolver is not set");
        got = (*gRegionResolver)(std::string(key), tensors)
                  .cast<std::vector<int64_t>>();
      }
      lock.lock();
      it = r->ints.emplace(shapeKey, std::move(got)).first;
    }
    ints = &it->second;
  }
  size_t params = tensors.size() + ints->size() + 1;
  TORCH_CHECK(params <= kMaxLauncherParams, "norm_opt::launch: ", r->name,
              " takes ", params, " parameters (at most ", kMaxLauncherParams,
              ")");
  uint64_t args[kMaxLauncherParams];
  size_t k = 0;
  for (const at::Tensor &t : tensors)
    args[k++] = reinterpret_cast<uintptr_t>(t.data_ptr());
  for (int64_t v : *ints)
    args[k++] = uint64_t(v);
  args[k++] = reinterpret_cast<uintptr_t>(
      c10::cuda::getCurrentCUDAStream().stream());
  Kernel k2{r->launcher, r->lastError};
  run(k2, r->name.c_str(), nullptr, [&](cudaStream_t) {
    return kCallTable[params](r->launcher, args);
  });
  return outputs;
}

// The modules' eager path (norm_opt.torch.layer_norm / rms_norm outside
// torch.compile): torch's forward and our backward as one C++ autograd
// function, so a layer costs the host no more than torch.nn's own.
struct LayerNormFunction
    : public torch::autograd::Function<LayerNormFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext *ctx,
                            const at::Tensor &x, const at::Tensor &weight,
                            const at::Tensor &bias, double eps) {
    c10::optional<at::Tensor> b;
    if (bias.defined())
      b = bias;
    auto [y, mean, rstd] =
        at::native_layer_norm(x, {x.size(-1)}, weight, b, eps);
    ctx->save_for_backward({x, weight, mean, rstd});
    ctx->saved_data["has_bias"] = bias.defined();
    return y;
  }
  static torch::autograd::variable_list
  backward(torch::autograd::AutogradContext *ctx,
           torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto [dx, dw, db] =
        layerNormBackward(grads[0], saved[0], saved[2], saved[3], saved[1]);
    bool hasBias = ctx->saved_data["has_bias"].toBool();
    return {dx, dw, hasBias ? db : at::Tensor(), at::Tensor()};
  }
};

struct RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext *ctx,
                            const at::Tensor &x, const at::Tensor &weight,
                            double eps) {
    // torch's fused forward also returns the fp32 rstd the backward needs.
    auto [y, rstd] = at::_fused_rms_norm(x, {x.size(-1)}, weight, eps);
    ctx->save_for_backward({x, weight, rstd});
    return y;
  }
  static torch::autograd::variable_list
  backward(torch::autograd::AutogradContext *ctx,
           torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto [dx, dw] = rmsNormBackward(grads[0], saved[0], saved[2], saved[1]);
    return {dx, dw, at::Tensor()};
  }
};

} // namespace

TORCH_LIBRARY_IMPL(norm_opt, CUDA, m) {
  m.impl("launch", &launchRegion);
  m.impl("layer_norm_backward", &layerNormBackward);
  m.impl("rms_norm_backward", &rmsNormBackward);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, module) {
  module.def("register_kernel", &registerKernel);
  module.def("set_resolver", [](pybind11::object resolver) {
    gResolver = new pybind11::object(std::move(resolver));
  });
  module.def("register_region", &registerRegion);
  module.def("set_region_resolver", [](pybind11::object resolver) {
    gRegionResolver = new pybind11::object(std::move(resolver));
  });
  module.def("launches", [] { return gLaunches.load(); });
  module.def("capture_workspaces", [] { return gCaptureWorkspaces.load(); });
  module.def("layer_norm",
             [](const at::Tensor &x, const at::Tensor &weight,
                const c10::optional<at::Tensor> &bias, double eps) {
               return LayerNormFunction::apply(
                   x, weight, bias ? *bias : at::Tensor(), eps);
             });
  module.def("rms_norm", [](const at::Tensor &x, const at::Tensor &weight,
                            double eps) {
    return RmsNormFunction::apply(x, weight, eps);
  });
}
