// gdn._C: the Python binding of the C++ API (include/gdn/gdn.h).
//
// It only checks arguments and dispatches: every array comes in zero-copy through DLPack
// (nb::ndarray), so numpy, torch and cupy arrays all work and no framework is linked at build time.
// Allocation is the caller's (the Python package): outputs are passed in, and scratch memory comes
// from `workspace`, an array or a callable that allocates `nbytes` bytes on the arrays' device.
//
// Errors: wrong dtype or device -> TypeError; wrong shape, stride or value -> ValueError; every
// message names the argument. gdn::Error (the library's own validation) -> ValueError.
//
// Files: args.h/.cpp (array and device checking), forward.cpp (the composed forward), stages.cpp
// (the stages and l2norm), ops.h (their declarations and argument tables), this file (the module).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstddef>
#include <iterator>
#include <string>
#include <utility>

#include "ops.h"

namespace nb = nanobind;

namespace {

using gdn_py::ArgSpec;

// The nb::arg of entry I of an argument table. (Whether it accepts None is part of nb::arg's type in
// nanobind >= 2.5, hence the table as a template argument and `if constexpr`.)
template <const auto& Table, size_t I>
auto nb_arg() {
  if constexpr (Table[I].accepts_none)
    return nb::arg(Table[I].name).none();
  else
    return nb::arg(Table[I].name);
}

// The table as Python sees it: a tuple of (name, accepts_none).
template <const auto& Table>
nb::tuple arg_table() {
  nb::list out;
  for (const ArgSpec& a : Table) out.append(nb::make_tuple(a.name, a.accepts_none));
  return nb::tuple(out);
}

// m.def(name, f, <one nb::arg per table entry>, doc); nanobind checks at compile time that there is
// one per parameter of f.
template <const auto& Table, typename F, size_t... I>
void def_from_table(nb::module_& m, const char* name, F* f, const char* doc, std::index_sequence<I...>) {
  m.def(name, f, nb_arg<Table, I>()..., doc);
}
template <const auto& Table, typename F>
void def_from_table(nb::module_& m, const char* name, F* f, const char* doc) {
  def_from_table<Table>(m, name, f, doc, std::make_index_sequence<std::size(Table)>{});
  m.attr((std::string(name) + "_args").c_str()) = arg_table<Table>();
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "gdn: Gated DeltaNet kernels (the chunked gated delta rule); low-level binding of the C++ API";

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const gdn::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  m.attr("chunk_size") = gdn::kChunkSize;
#ifdef GDN_HAS_CUDA
  m.attr("built_with_cuda") = true;
#else
  m.attr("built_with_cuda") = false;
#endif
  m.def("cuda_available", &gdn::cuda_available,
        "True when gdn was built with the CUDA backend and a CUDA device is visible.");
  m.def("max_num_chunks", &gdn::max_num_chunks, nb::arg("num_tokens"), nb::arg("num_seqs"));

  // Also exported as forward_args and stage_args (tuples of (name, accepts_none)).
  def_from_table<gdn_py::kForwardArgs>(
      m, "forward", &gdn_py::forward,
      "The composed forward (chunked, or the recurrence when recurrent=True) over preallocated outputs.");

  def_from_table<gdn_py::kStageArgs>(m, "stage", &gdn_py::stage,
                                     "One stage of the chunked forward (SPEC.md section 3).");

  m.def("l2norm", &gdn_py::l2norm, nb::arg("x"), nb::arg("y"), nb::arg("stream"), nb::arg("num_threads"),
        "y = x / sqrt(sum(x^2) + 1e-6) per token and head, in fp32.");
}
