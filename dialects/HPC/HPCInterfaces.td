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

#endif // HPC_INTERFACES_TD
