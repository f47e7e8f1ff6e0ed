// fillScalarWrites (csrc/passes/scalar_writes.cpp): which copies of a host number into a
// view become fuser::fill_with_scalar_.
#include <gtest/gtest.h>

#include <string>

#include "ir_test_helpers.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using testing_helpers::countKind;

// TorchScript's `x[0:2] = n`, with $DTYPE_OF, $DEVICE_OF, $GRAD and $EXTRA filled in.
std::string sliceWrite(const std::string& dtype_of, const std::string& device_of,
                       const std::string& grad, const std::string& extra = "") {
  std::string ir = R"IR(
graph(%x : Float(6, 5, strides=[5, 1], requires_grad=0, device=cpu), %n : int, %l : int[]):
  %0 : int = prim::Constant[value=0]()
  %1 : int = prim::Constant[value=1]()
  %2 : int = prim::Constant[value=2]()
  %no : bool = prim::Constant[value=0]()
  %yes : bool = prim::Constant[value=1]()
  %s : Tensor = aten::slice(%x, %0, %0, %2, %1)
  %d : int = prim::dtype($DTYPE_OF)
  %dev : Device = prim::device($DEVICE_OF)
  %v : Tensor = aten::tensor(%n, %d, %dev, $GRAD)
  %c : Tensor = aten::copy_(%s, %v, %no)
  $EXTRA
  return (%x)
)IR";
  return testing_helpers::parseWithTypes(ir, {{"$DTYPE_OF", dtype_of},
                                              {"$DEVICE_OF", device_of},
                                              {"$GRAD", grad},
                                              {"$EXTRA", extra}})
             ->toString();
}

// fill_with_scalar_ nodes after the pass, and copy_ nodes left.
std::pair<size_t, size_t> fillsAndCopies(const std::string& ir) {
  auto graph = testing_helpers::parseWithTypes(ir, {});
  fillScalarWrites(graph);
  graph->lint();
  return {countKind(graph->block(), fillWithScalarSymbol()),
          countKind(graph->block(), c10::aten::copy_)};
}

TEST(ScalarWrites, ANumberCopiedIntoAViewWithItsOwnDtypeAndDeviceIsFilled) {
  auto graph = testing_helpers::parseWithTypes(sliceWrite("%s", "%s", "%no"), {});
  fillScalarWrites(graph);
  graph->lint();
  ASSERT_EQ(countKind(graph->block(), fillWithScalarSymbol()), 1u);
  EXPECT_EQ(countKind(graph->block(), c10::aten::copy_), 0u);
  EXPECT_EQ(countKind(graph->block(), c10::aten::tensor), 0u);
  for (torch::jit::Node* node : graph->nodes()) {
    if (node->kind() != fillWithScalarSymbol()) continue;
    EXPECT_EQ(node->input(0)->node()->kind(), c10::aten::slice);  // the view written
    EXPECT_EQ(node->input(1), graph->inputs()[1]);                // the number
  }
}

TEST(ScalarWrites, OtherHostTensorsStayCopies) {
  // Another tensor's dtype or device: other values, or another device written from.
  EXPECT_EQ(fillsAndCopies(sliceWrite("%x", "%s", "%no")), std::make_pair(size_t{0}, size_t{1}));
  EXPECT_EQ(fillsAndCopies(sliceWrite("%s", "%x", "%no")), std::make_pair(size_t{0}, size_t{1}));
  // A tensor recording its gradient makes the view record one too.
  EXPECT_EQ(fillsAndCopies(sliceWrite("%s", "%s", "%yes")), std::make_pair(size_t{0}, size_t{1}));
  // Read again after the copy.
  EXPECT_EQ(fillsAndCopies(sliceWrite("%s", "%s", "%no", "%r : Tensor = aten::add(%v, %x, %1)")),
            std::make_pair(size_t{0}, size_t{1}));
}

TEST(ScalarWrites, ListsStayCopiesAndWritesInBlocksAreFilled) {
  std::string list = sliceWrite("%s", "%s", "%no");
  list.replace(list.find("aten::tensor(%n"), std::string("aten::tensor(%n").size(),
               "aten::tensor(%l");
  EXPECT_EQ(fillsAndCopies(list), std::make_pair(size_t{0}, size_t{1}));

  const std::string in_branch = R"IR(
graph(%x : Float(6, 5, strides=[5, 1], requires_grad=0, device=cpu), %b : bool, %f : float):
  %0 : int = prim::Constant[value=0]()
  %no : bool = prim::Constant[value=0]()
  %r : Tensor = prim::If(%b)
    block0():
      %s : Tensor = aten::select(%x, %0, %0)
      %d : int = prim::dtype(%s)
      %dev : Device = prim::device(%s)
      %v : Tensor = aten::tensor(%f, %d, %dev, %no)
      %c : Tensor = aten::copy_(%s, %v, %no)
      -> (%c)
    block1():
      -> (%x)
  return (%r)
)IR";
  EXPECT_EQ(fillsAndCopies(in_branch), std::make_pair(size_t{1}, size_t{0}));
}

}  // namespace
}  // namespace fuser
