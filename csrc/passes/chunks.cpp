// Chunk rewrites (SEEDS.md, the graph fuser's chunk handling), our own code.
//
// partition.cpp calls moveChunkBeforeProducer while it grows a group, so that
// chunk(a + b) becomes chunks of a and b feeding one add per chunk, and those adds join
// the group that reads the chunks. expandUnfusedChunks, the pipeline stage, runs after
// partitioning: afterwards no BroadcastingChunk is left outside a fusion group.
#include "passes/chunks.h"
#include "value_types.h"

#include <algorithm>
#include <vector>

#include "passes/fusibility.h"
#include "passes/groups.h"
#include "passes/pipeline.h"
#include "passes/reasons.h"
#include "passes/shapes.h"

namespace fuser {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

c10::Symbol broadcastingChunkSymbol() { return c10::prim::BroadcastingChunk; }

bool isChunk(const Node* node) {
  return node->kind() == c10::prim::ConstantChunk || node->kind() == broadcastingChunkSymbol();
}

namespace {

// Outputs of `chunk` that belong to its input `index`: chunk c of it is outputs[index*n + c].
std::vector<Value*> chunksOfInput(Node* chunk, size_t index) {
  const int64_t n = chunk->i(c10::attr::chunks);
  std::vector<Value*> out;
  for (int64_t c = 0; c < n; ++c) out.push_back(chunk->output(index * n + c));
  return out;
}

// The complete type of some read chunk: every chunk of a broadcast has its shape.
c10::TensorTypePtr chunkShapeType(const Node* chunk) {
  for (const Value* out : chunk->outputs()) {
    if (!out->uses().empty() && checkTensorValue(out)) {
      return out->type()->expect<c10::TensorType>();
    }
  }
  return nullptr;
}

// A chunk of `input` broadcast to the chunks' shape (`shape`, a read chunk's type):
// `shape`'s sizes, with `input`'s strides where it has the dim and a zero stride where
// it is broadcast (the view broadcast_tensors and the chunk give it). A bias [C] chunked
// beside an [N, T, 2C] product is read along its rows, not as a copy laid out like them;
// the partition and the executors see the layout they will meet. `shape` itself where
// `input` has no complete sizes and strides.
c10::TensorTypePtr chunkOfBroadcastType(const c10::TensorTypePtr& shape,
                                        const c10::TensorType& input, int64_t dim) {
  auto sizes = shape->sizes().concrete_sizes();
  auto in_sizes = input.sizes().concrete_sizes();
  auto in_strides = input.strides().concrete_sizes();
  if (!sizes || !in_sizes || !in_strides || in_sizes->size() > sizes->size()) {
    return shape;
  }
  const int64_t rank = static_cast<int64_t>(sizes->size());
  const int64_t lead = rank - static_cast<int64_t>(in_sizes->size());
  if (dim < 0) dim += rank;
  std::vector<int64_t> strides(rank, 0);
  for (int64_t d = lead; d < rank; ++d) {
    const int64_t in_size = (*in_sizes)[d - lead];
    // Along the chunked dim the whole size is several chunks: a size 1 there broadcasts.
    const bool broadcast = in_size == 1 && (d == dim || (*sizes)[d] != 1);
    strides[d] = broadcast ? 0 : (*in_strides)[d - lead];
  }
  return shape->withSizesStrides(*sizes, strides);
}

// Each `aten::size(out)` of the elementwise `producer` becomes the broadcast of its
// tensor operands' sizes, so the producer's result need not exist.
void replaceSizesByBroadcastSizes(Node* producer) {
  Graph* graph = producer->owningGraph();
  Value* out = producer->output();
  while (!out->uses().empty()) {
    Node* size = out->uses()[0].user;
    torch::jit::WithInsertPoint guard(size);
    std::vector<Value*> operand_sizes;
    for (Value* v : producer->inputs()) {
      if (isTensor(v)) operand_sizes.push_back(graph->insert(c10::aten::size, {v}));
    }
    Value* result = operand_sizes[0];
    if (operand_sizes.size() > 1) {
      result = graph->insertNode(graph->create(c10::prim::BroadcastSizes, operand_sizes))->output();
      result->setType(c10::ListType::ofInts());
    }
    size->output()->replaceAllUsesWith(result);
    size->destroy();
  }
}

// A prim::dtype of the unchunked value whose result is read only after `chunk` (or
// returned): it can read the dtype of one per-chunk copy instead, which is the same.
bool isMovableDtypeRead(const Node* reader, const Node* chunk) {
  if (reader->kind() != c10::prim::dtype || reader->owningBlock() != chunk->owningBlock()) {
    return false;
  }
  for (const auto& use : reader->output()->uses()) {
    const Node* user = use.user;
    if (user->kind() == c10::prim::Return) continue;
    if (user->owningBlock() != chunk->owningBlock() || !user->isAfter(chunk)) return false;
  }
  return true;
}

}  // namespace

FusionDecision checkChunkMovable(const Node* chunk, size_t index) {
  const Value* value = chunk->input(index);
  const Node* producer = value->node();
  if (producer->owningBlock() != chunk->owningBlock() || producer->kind() == c10::prim::Param) {
    return FusionDecision::no("the chunked value is not computed in this block");
  }
  if (isFusionGroup(producer)) return FusionDecision::no("the chunked value comes from a group");
  if (auto d = checkFusible(producer); !d) return d;
  // type_as keeps self's shape instead of broadcasting its operands; a reduction's
  // result is not computed element by element, nor is batch_norm's per-channel read.
  if (producer->kind() == c10::aten::type_as || producer->outputs().size() != 1 ||
      reduces(producer) || holdsBatchNorm(producer)) {
    return FusionDecision::no(describeNode(producer) + " is not a broadcasting elementwise op");
  }
  for (const auto& use : value->uses()) {
    // Sizes (autodiff's forward asks for them) are rebuilt from the operands' sizes;
    // dtypes (autodiff keeps those of autocast casts' inputs) read a per-chunk result's.
    if (use.user != chunk && !isWholeSize(use.user) && !isMovableDtypeRead(use.user, chunk)) {
      return FusionDecision::no("the unchunked value is also read by " + describeNode(use.user));
    }
  }
  if (!chunkShapeType(chunk)) return FusionDecision::no("no read chunk has a complete type");
  return FusionDecision::yes();
}

Node* moveChunkBeforeProducer(Node* chunk, size_t index) {
  Graph* graph = chunk->owningGraph();
  Node* producer = chunk->input(index)->node();
  const int64_t n = chunk->i(c10::attr::chunks);
  const c10::TensorTypePtr shape = chunkShapeType(chunk);

  std::vector<Value*> inputs;
  for (size_t i = 0; i < chunk->inputs().size(); ++i) {
    if (i != index) inputs.push_back(chunk->input(i));
  }
  for (Value* v : producer->inputs()) {
    if (isTensor(v) && std::find(inputs.begin(), inputs.end(), v) == inputs.end()) {
      inputs.push_back(v);
    }
  }

  Node* moved = graph->create(broadcastingChunkSymbol(), inputs, inputs.size() * n);
  moved->i_(c10::attr::chunks, n)->i_(c10::attr::dim, chunk->i(c10::attr::dim));
  moved->insertBefore(chunk);
  const int64_t dim = chunk->i(c10::attr::dim);
  for (size_t j = 0; j < inputs.size(); ++j) {
    auto input_type = inputs[j]->type()->expect<c10::TensorType>();
    for (Value* out : chunksOfInput(moved, j)) {
      out->setType(chunkOfBroadcastType(shape, *input_type, dim)
                       ->withScalarType(input_type->scalarType())
                       ->withRequiresGrad(input_type->requiresGrad()));
    }
  }
  auto chunkOf = [&](Value* v, int64_t c) {
    auto j = std::find(inputs.begin(), inputs.end(), v) - inputs.begin();
    return moved->output(j * n + c);
  };

  for (size_t i = 0; i < chunk->inputs().size(); ++i) {
    if (i == index) continue;
    auto old_chunks = chunksOfInput(chunk, i);
    for (int64_t c = 0; c < n; ++c) {
      old_chunks[c]->replaceAllUsesWith(chunkOf(chunk->input(i), c));
    }
  }
  auto produced_chunks = chunksOfInput(chunk, index);
  Value* some_copy = nullptr;
  for (int64_t c = 0; c < n; ++c) {
    Value* old = produced_chunks[c];
    if (old->uses().empty()) continue;  // an unread chunk needs no copy of the op
    Node* copy = graph->createClone(
        producer, [&](Value* v) { return isTensor(v) ? chunkOf(v, c) : v; });
    copy->insertBefore(chunk);
    copy->output()->setType(old->type());
    old->replaceAllUsesWith(copy->output());
    some_copy = copy->output();
  }
  std::vector<Node*> dtype_reads;
  for (const auto& use : producer->output()->uses()) {
    if (use.user->kind() == c10::prim::dtype) dtype_reads.push_back(use.user);
  }
  for (Node* read : dtype_reads) {  // checkChunkMovable: all read after the chunk
    read->replaceInput(0, some_copy);
    read->moveBefore(chunk);
  }
  chunk->destroy();
  replaceSizesByBroadcastSizes(producer);
  producer->destroy();
  return moved;
}

void expandBroadcastingChunk(Node* chunk) {
  Graph* graph = chunk->owningGraph();
  torch::jit::WithInsertPoint guard(chunk);
  std::vector<Value*> broadcast = chunk->inputs().vec();
  if (broadcast.size() > 1) {
    Value* list = graph->insertNode(graph->createList(c10::TensorType::get(), broadcast))->output();
    Node* tensors = graph->insertNode(graph->create(c10::aten::broadcast_tensors, {list}));
    tensors->output()->setType(c10::ListType::ofTensors());
    Node* unpack = graph->insertNode(graph->createListUnpack(tensors->output(), broadcast.size()));
    broadcast = unpack->outputs().vec();
  }
  const int64_t n = chunk->i(c10::attr::chunks);
  for (size_t j = 0; j < broadcast.size(); ++j) {
    Node* split = graph->insertNode(graph->create(c10::prim::ConstantChunk, {broadcast[j]}, n));
    split->i_(c10::attr::chunks, n)->i_(c10::attr::dim, chunk->i(c10::attr::dim));
    auto old_chunks = chunksOfInput(chunk, j);
    for (int64_t c = 0; c < n; ++c) {
      split->output(c)->copyMetadata(old_chunks[c]);
      old_chunks[c]->replaceAllUsesWith(split->output(c));
    }
  }
  chunk->destroy();
}

void expandBroadcastingChunks(Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (Block* sub : node->blocks()) expandBroadcastingChunks(sub);
    if (node->kind() == broadcastingChunkSymbol()) expandBroadcastingChunk(node);
  }
}

void expandUnfusedChunks(GraphPtr& graph) { expandBroadcastingChunks(graph->block()); }

}  // namespace fuser
