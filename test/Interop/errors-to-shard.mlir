// RUN: hpc-opt %s --split-input-file --verify-diagnostics --convert-dist-to-shard
// RUN: not hpc-opt %s --split-input-file --convert-dist-to-shard=annotations=some 2>&1 | FileCheck %s --check-prefix=OPTION

// Every error of convert-dist-to-shard.

// OPTION: error: convert-dist-to-shard: annotations must be 'all' or 'inputs', not 'some'

// expected-error @+1 {{convert-dist-to-shard needs a 'dist.mesh' module attribute (run dist-propagate first)}}
module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{convert-dist-to-shard: the module already has a symbol named 'mesh'}}
module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
  func.func @mesh(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'dist.annotate' op has partial axes, which shard shardings cannot express}}
    %0 = dist.annotate %x : tensor<4xf32> to #dist.sharding<[[]], partial = sum[tp]>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<pp = 2 : inter_node>} {
  func.func @main(%x: tensor<4xf32>) {
    // expected-error @+1 {{'dist.send' op has no counterpart in the shard dialect (shard addresses peers by absolute grid position)}}
    dist.send %x along "pp" offset 1 : tensor<4xf32>
    return
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'dist.all_reduce_start' op has no counterpart in the shard dialect}}
    %t = dist.all_reduce_start %x over ["tp"] sum : tensor<4xf32> -> !dist.token<tensor<4xf32>>
    %0 = dist.wait %t : !dist.token<tensor<4xf32>> -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

