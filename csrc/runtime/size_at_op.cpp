// The fuser::size_at operator (symbols.h; passes/operand_sizes.cpp): the size at `dim` of
// a tensor whose sizes are given, with aten::size.int's errors for a dim out of range
// ("Dimension out of range ...", "Dimension specified as -1 but tensor has no
// dimensions"), where a list's __getitem__ would say "list index out of range".
#include <c10/core/WrapDimMinimal.h>
#include <torch/csrc/jit/runtime/custom_operator.h>

namespace fuser::runtime {
namespace {

torch::jit::RegisterOperators sizeAtOpRegistration({
    torch::jit::Operator(
        "fuser::size_at(int[] sizes, int dim) -> int",
        [](torch::jit::Stack& stack) {
          const int64_t dim = torch::jit::pop(stack).toInt();
          const c10::List<int64_t> sizes = torch::jit::pop(stack).toIntList();
          const int64_t rank = static_cast<int64_t>(sizes.size());
          const int64_t wrapped = c10::maybe_wrap_dim(dim, rank, /*wrap_scalar=*/false);
          torch::jit::push(stack, sizes.get(wrapped));
        },
        c10::AliasAnalysisKind::PURE_FUNCTION),
});

}  // namespace
}  // namespace fuser::runtime
