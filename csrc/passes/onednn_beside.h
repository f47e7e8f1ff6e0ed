// oneDNN Graph beside us on CPU (DESIGN notes: README "Where we differ").
//
// oneDNN Graph is another TorchScript pre-pass. It fuses convolutions and matmuls with
// their post-ops (bias, relu, residual add, ...) into oneDNN partitions that run far
// faster on CPU than ATen's kernels; we fuse elementwise work better. The two compose
// in this order, chosen by measurement (README): our pass runs first and leaves alone
// every node oneDNN Graph would put into a partition with a convolution or matmul;
// oneDNN Graph's own pass runs after ours on what is left.
//
// Why this order: oneDNN's pass ends by wiping every tensor type, so nothing can fuse
// after it; and asking oneDNN itself (a dry run on a copy of the graph) what it would
// take keeps us exact about its patterns without restating its rules here.
#pragma once

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/pass_manager.h>

#include <memory>
#include <string>

namespace fuser {

// True for oneDNN Graph's entry in TorchScript's pre-pass list, guarded or not.
bool isOneDnnPass(const torch::jit::GraphPassEntry& entry);

// True when oneDNN Graph's pre-pass is registered (torch.jit.enable_onednn_fusion).
bool oneDnnGraphRegistered();

// Moves our pre-pass (`ours`) before oneDNN Graph's in TorchScript's pre-pass list, so
// that a user who enabled oneDNN Graph first still gets both. No-op when it is absent
// or already after ours. Also guards oneDNN's entry: from then on its pass runs on a
// copy of the graph, with scalar arithmetic hidden from it (onednn_hidden_scalars.h),
// and a graph it throws on is left as it was (markOneDnnPatterns does the same for an
// entry registered after enable()).
void runBeforeOneDnnGraph(torch::jit::GraphPassNameType ours);

// Gives oneDNN's entry its own pass back (disable()): without us, oneDNN Graph runs as
// it does alone.
void unguardOneDnnPass();

// Pipeline stage, after prepareGraph: when oneDNN Graph is registered and
// `leave_patterns`, marks each node it would fuse together with a convolution or matmul;
// checkFusible refuses marked nodes. Unmarks nothing: clearOneDnnMarks does, in cleanup.
// Returns whether oneDNN Graph's pass will work on this graph after ours (it is
// registered and its dry run succeeded); only then must cleanup keep the types it reads.
// Where its dry run throws, cleanup wipes the types as usual, so that its real pass
// finds nothing to take instead of failing the user's call.
bool markOneDnnPatterns(std::shared_ptr<torch::jit::Graph>& graph, bool leave_patterns);

// Whether oneDNN Graph's pass, run on a copy, takes `graph` without throwing. Its pass
// throws on some graphs ours made from graphs it takes (its merging loses track of a
// partition's outputs); the pipeline then fuses again without leaving it anything.
// Says so under FUSER_DUMP=reasons.
bool oneDnnPassSucceeds(const std::shared_ptr<torch::jit::Graph>& graph);

// True for a node markOneDnnPatterns marked; oneDnnPartner names the convolution or
// matmul kind it would be fused with.
bool isLeftToOneDnn(const torch::jit::Node* node);
std::string oneDnnPartner(const torch::jit::Node* node);

// Removes the marks (cleanup stage), so no attribute of ours stays on an aten node.
void clearOneDnnMarks(torch::jit::Block* block);

}  // namespace fuser
