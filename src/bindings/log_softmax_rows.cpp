// metal_backend.log_softmax_rows: per-row log-softmax normalizers and top-k of a float32 matrix on the
// host (cpu/kernels/log_softmax_rows.h), for decoders that pick tokens from logits read back.
#include <pybind11/numpy.h>

#include <cstdint>
#include <string>

#include "bindings/bindings.h"
#include "bindings/gil.h"
#include "core/errors.h"
#include "cpu/kernels/log_softmax_rows.h"

namespace mb::bindings {

void init_log_softmax_rows(py::module_& m) {
    m.def("log_softmax_rows", [](py::handle obj, py::handle k_obj) {
        const char* who = "log_softmax_rows";
        const int64_t k = to_int64(k_obj, who, "k");
        // float32 rows, C-contiguous: other dtypes and layouts are converted (a copy), as np.asarray does.
        auto x = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(obj);
        if (!x) {
            fail<InvalidArgumentError>(who, "logits must be a float array, got ",
                                       std::string(py::str(py::type::of(obj))));
        }
        if (x.ndim() != 2) fail<InvalidArgumentError>(who, "logits must be 2-D (rows, entries), got ", x.ndim(), "-D");
        const int64_t rows = x.shape(0), v = x.shape(1);
        if (v == 0) fail<InvalidArgumentError>(who, "rows of 0 entries have no log-softmax");
        if (k < 0 || k > v) fail<OutOfRangeError>(who, "k must be in 0..", v, " (the row length), got ", k);
        py::array_t<float> top({rows, int64_t(1)});
        py::array_t<float> log_total({rows, int64_t(1)});
        py::array_t<int64_t> best({rows, k});
        const float* px = x.data();
        float* pt = top.mutable_data();
        float* pl = log_total.mutable_data();
        int64_t* pb = best.mutable_data();
        {
            ReleasedGil nogil;
            log_softmax_rows(px, rows, v, k, pt, pl, pb);
        }
        return py::make_tuple(top, log_total, best);
    }, py::arg("logits"), py::arg("k") = 0,
       "log_softmax_rows(logits, k=0) -> (top, log_total, best)\n\n"
       "Per row of a 2-D float32 array (others are converted): top (rows, 1), the row's max (NaN if it\n"
       "holds a NaN); log_total (rows, 1), log(sum(exp(row - top))) with the sum in float64, so that\n"
       "log_softmax(row)[j] == (row[j] - top) - log_total (NaN where top is not finite); best (rows, k)\n"
       "int64, the indices of the k largest entries, largest first, ties to the lower index, NaN below\n"
       "every number. One thread, GIL released.");
}

}  // namespace mb::bindings
