//===- HPCInterfaces.td - interfaces of hpc ops ------------*- tablegen -*-===//
//
// What every hpc op answers for the distributed-parallel passes.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_INTERFACES_TD
#define HPC_INTERFACES_TD

include "mlir/IR/OpBase.td"

def HPC_ShardingRuleInterface : OpInterface<"ShardingRuleInterface"> {
  let cppNamespace = "::hpc";
  let description = [{
    How an op's dimensions may be split over a device mesh, as einsum-like
    factors: each operand and result dimension maps to a factor (or to none,
    for a broadcast size-1 dimension or a dimension that only moves whole).
    Dimensions that share a factor split together. A reduction factor
    appears only in operands: splitting it leaves partial results that a
    collective must finish. A factor that needs replication cannot be split
    without exchanging data (a softmax axis, a convolution's spatial
    dimensions, a sliced dimension).
  }];
  let methods = [
    InterfaceMethod<"The op's sharding rule.", "::hpc::ShardingRule",
                    "getShardingRule", (ins)>
  ];
}

def HPC_GradientInterface : OpInterface<"GradientInterface"> {
  let cppNamespace = "::hpc";
  let description = [{
    Reverse-mode derivative of an op (hpc-autodiff): given the gradients of
    the op's results (null where a result has none), build hpc ops after the
    insertion point of `b` that compute the gradient of every operand, one
    entry per operand in order (null for an operand that takes none: an
    integer index, a mask, a buffer). Attached to the ops in
    HPCGradients.cpp; an op without it has no gradient.
  }];
  let methods = [
    InterfaceMethod<"Builds the operand gradients.", "::mlir::LogicalResult",
                    "buildGradients",
                    (ins "::mlir::OpBuilder &":$b,
                         "::mlir::ArrayRef<::mlir::Value>":$resultGrads,
                         "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // HPC_INTERFACES_TD
