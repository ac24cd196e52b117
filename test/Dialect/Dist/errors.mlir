// RUN: hpc-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{a mesh needs at least one axis}}
module attributes {dist.mesh = #dist.mesh<>} {}

// -----

// expected-error @+1 {{mesh axis 'dp' is repeated}}
module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node, dp = 4 : intra_node>} {}

// -----

// expected-error @+1 {{mesh axis 'tp' must have a positive size, not 0}}
module attributes {dist.mesh = #dist.mesh<tp = 0 : intra_node>} {}

// -----

// expected-error @+1 {{topology level must be intra_node or inter_node, not 'rack'}}
module attributes {dist.mesh = #dist.mesh<tp = 2 : rack>} {}

// -----

// expected-error @+1 {{mesh axis 'tp' is used more than once in a sharding}}
module attributes {s = #dist.sharding<[[tp], [tp]]>} {}

// -----

// expected-error @+1 {{mesh axis 'tp' is used more than once in a sharding}}
module attributes {s = #dist.sharding<[[tp], []], partial = sum[tp]>} {}

// -----

// expected-error @+1 {{unknown reduction 'mean'}}
module attributes {s = #dist.sharding<[[], []], partial = mean[tp]>} {}

// -----

func.func @no_mesh(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dist.annotate' op needs a #dist.mesh in a 'dist.mesh' attribute of an enclosing op (the module)}}
  %0 = dist.annotate %x : tensor<4xf32> to #dist.sharding<[[]]>
  return %0 : tensor<4xf32>
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @rank(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
    // expected-error @+1 {{'dist.annotate' op sharding has 1 dimension entries for a tensor of rank 2}}
    %0 = dist.annotate %x : tensor<4x4xf32> to #dist.sharding<[[tp]]>
    return %0 : tensor<4x4xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @unknown_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'dist.annotate' op mesh axis 'dp' is not in the mesh #dist.mesh<tp = 4 : intra_node>}}
    %0 = dist.annotate %x : tensor<4xf32> to #dist.sharding<[[dp]]>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @unknown_partial_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'dist.annotate' op mesh axis 'dp' is not in the mesh}}
    %0 = dist.annotate %x : tensor<4xf32> to #dist.sharding<[[]], partial = sum[dp]>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node, tp = 4 : intra_node>} {
  func.func @indivisible(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
    // expected-error @+1 {{'dist.annotate' op dimension 0 of size 6 is not divisible by 8 (mesh axes dp, tp)}}
    %0 = dist.annotate %x : tensor<6x4xf32> to #dist.sharding<[[dp, tp], []]>
    return %0 : tensor<6x4xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @reshard(%x: tensor<6xf32>) -> tensor<6xf32> {
    // expected-error @+1 {{'dist.reshard' op target dimension 0 of size 6 is not divisible by 4 (mesh axes tp)}}
    %0 = dist.reshard %x : tensor<6xf32> from #dist.sharding<[[]]> to #dist.sharding<[[tp]]>
    return %0 : tensor<6xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @reshard_source(%x: tensor<6xf32>) -> tensor<6xf32> {
    // expected-error @+1 {{'dist.reshard' op source mesh axis 'pp' is not in the mesh}}
    %0 = dist.reshard %x : tensor<6xf32> from #dist.sharding<[[pp]]> to #dist.sharding<[[]]>
    return %0 : tensor<6xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @collective_unknown_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'dist.all_reduce' op mesh axis 'dp' is not in the mesh}}
    %0 = dist.all_reduce %x over ["dp"] sum : tensor<4xf32> -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @collective_repeated_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'dist.all_reduce' op mesh axis 'tp' is repeated}}
    %0 = dist.all_reduce %x over ["tp", "tp"] sum : tensor<4xf32> -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @collective_no_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'dist.all_reduce' op needs at least one mesh axis}}
    %0 = dist.all_reduce %x over [] sum : tensor<4xf32> -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @collective_element_type(%x: tensor<4xf32>) -> tensor<4xf16> {
    // expected-error @+1 {{'dist.all_reduce' op result element type 'f16' differs from the operand's 'f32'}}
    %0 = dist.all_reduce %x over ["tp"] sum : tensor<4xf32> -> tensor<4xf16>
    return %0 : tensor<4xf16>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @all_reduce_shape(%x: tensor<4xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{'dist.all_reduce' op result type 'tensor<8xf32>' does not match the expected 'tensor<4xf32>'}}
    %0 = dist.all_reduce %x over ["tp"] sum : tensor<4xf32> -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @reduce_scatter_indivisible(%x: tensor<6xf32>) -> tensor<1xf32> {
    // expected-error @+1 {{'dist.reduce_scatter' op dimension 0 of size 6 is not divisible by the group size 4 (mesh axes tp)}}
    %0 = dist.reduce_scatter %x over ["tp"] sum dim 0 : tensor<6xf32> -> tensor<1xf32>
    return %0 : tensor<1xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @reduce_scatter_dim(%x: tensor<8xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{'dist.reduce_scatter' op dim 1 is out of range for rank 1}}
    %0 = dist.reduce_scatter %x over ["tp"] sum dim 1 : tensor<8xf32> -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @all_gather_shape(%x: tensor<2x3xf32>) -> tensor<2x6xf32> {
    // expected-error @+1 {{'dist.all_gather' op result type 'tensor<2x6xf32>' does not match the expected 'tensor<2x12xf32>'}}
    %0 = dist.all_gather %x over ["tp"] dim 1 : tensor<2x3xf32> -> tensor<2x6xf32>
    return %0 : tensor<2x6xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @all_to_all_split(%x: tensor<2x6xf32>) -> tensor<8x1xf32> {
    // expected-error @+1 {{'dist.all_to_all' op dimension 1 of size 6 is not divisible by the group size 4 (mesh axes tp)}}
    %0 = dist.all_to_all %x over ["tp"] split 1 concat 0 : tensor<2x6xf32> -> tensor<8x1xf32>
    return %0 : tensor<8x1xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @all_to_all_concat(%x: tensor<2x8xf32>) -> tensor<8x2xf32> {
    // expected-error @+1 {{'dist.all_to_all' op concat dim 2 is out of range for rank 2}}
    %0 = dist.all_to_all %x over ["tp"] split 1 concat 2 : tensor<2x8xf32> -> tensor<8x2xf32>
    return %0 : tensor<8x2xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @broadcast_root(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'dist.broadcast' op root 4 is not a rank of the group of 4}}
    %0 = dist.broadcast %x over ["tp"] root 4 : tensor<4xf32> -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @token_payload(%x: tensor<4xf32>) {
    // expected-error @+1 {{'dist.all_reduce_start' op token must carry the result tensor type}}
    %0 = dist.all_reduce_start %x over ["tp"] sum : tensor<4xf32> -> !dist.token
    return
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @token_shape(%x: tensor<8xf32>) {
    // expected-error @+1 {{'dist.all_gather_start' op result type 'tensor<8xf32>' does not match the expected 'tensor<32xf32>'}}
    %0 = dist.all_gather_start %x over ["tp"] dim 0 : tensor<8xf32> -> !dist.token<tensor<8xf32>>
    return
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<pp = 4 : inter_node>} {
  func.func @send_offset(%x: tensor<4xf32>) {
    // expected-error @+1 {{'dist.send' op offset 4 does not reach another rank along axis 'pp' of size 4}}
    dist.send %x along "pp" offset 4 : tensor<4xf32>
    return
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<pp = 4 : inter_node>} {
  func.func @send_zero(%x: tensor<4xf32>) {
    // expected-error @+1 {{'dist.send' op offset 0 does not reach another rank along axis 'pp' of size 4}}
    dist.send %x along "pp" offset 0 : tensor<4xf32>
    return
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<pp = 4 : inter_node>} {
  func.func @send_axis(%x: tensor<4xf32>) {
    // expected-error @+1 {{'dist.send' op mesh axis 'tp' is not in the mesh}}
    dist.send %x along "tp" offset 1 : tensor<4xf32>
    return
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<pp = 4 : inter_node>} {
  func.func @send_start_payload(%x: tensor<4xf32>) {
    // expected-error @+1 {{'dist.send_start' op token of a send carries no payload}}
    %t = dist.send_start %x along "pp" offset 1 : tensor<4xf32> -> !dist.token<tensor<4xf32>>
    return
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<pp = 4 : inter_node>} {
  func.func @recv_axis() -> tensor<4xf32> {
    // expected-error @+1 {{'dist.recv' op offset -4 does not reach another rank along axis 'pp' of size 4}}
    %r = dist.recv along "pp" offset -4 : tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<pp = 4 : inter_node>} {
  func.func @recv_start_payload() {
    // expected-error @+1 {{'dist.recv_start' op token of a recv must carry the received tensor type}}
    %t = dist.recv_start along "pp" offset 1 : !dist.token
    return
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @wait_type(%x: tensor<4xf32>) -> tensor<8xf32> {
    %t = dist.all_reduce_start %x over ["tp"] sum : tensor<4xf32> -> !dist.token<tensor<4xf32>>
    // expected-error @+1 {{'dist.wait' op result must be the token's payload 'tensor<4xf32>'}}
    %y = dist.wait %t : !dist.token<tensor<4xf32>> -> tensor<8xf32>
    return %y : tensor<8xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<pp = 4 : inter_node>} {
  func.func @wait_no_payload(%x: tensor<4xf32>) -> tensor<4xf32> {
    %t = dist.send_start %x along "pp" offset 1 : tensor<4xf32> -> !dist.token
    // expected-error @+1 {{'dist.wait' op token carries no payload, so wait has no result}}
    %y = dist.wait %t : !dist.token -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<tp = 4 : intra_node>} {
  func.func @all_slice_indivisible(%x: tensor<6xf32>) -> tensor<1xf32> {
    // expected-error @+1 {{'dist.all_slice' op dimension 0 of size 6 is not divisible by the group size 4 (mesh axes tp)}}
    %0 = dist.all_slice %x over ["tp"] dim 0 : tensor<6xf32> -> tensor<1xf32>
    return %0 : tensor<1xf32>
  }
}

// -----

// expected-error @+1 {{'hpc.weight' op 'dist.pieces_of' must be {shape = array<i64: ...>, dim = D}}}
%w0 = hpc.weight "w" {dist.pieces_of = {dim = 1 : i64}} : tensor<2x2x2xf32> = dense<1.0>

// -----

// expected-error @+1 {{'hpc.weight' op 'dist.pieces_of' needs one result of rank 3 (pieces, then the piece's dims) and a dim below 2}}
%w1 = hpc.weight "w" {dist.pieces_of = {shape = array<i64: 2, 4>, dim = 2 : i64}} : tensor<2x2x2xf32> = dense<1.0>

// -----

// expected-error @+1 {{'hpc.weight' op 'dist.pieces_of': 'tensor<2x2x2xf32>' is not 2 pieces along dim 1 of a tensor of shape [2, 6]}}
%w2 = hpc.weight "w" {dist.pieces_of = {shape = array<i64: 2, 6>, dim = 1 : i64}} : tensor<2x2x2xf32> = dense<1.0>

// -----

// expected-error @+1 {{powersgd: rank 5 is above the smaller dimension of matrix piece 0 (4x8)}}
module attributes {c = #dist.powersgd<rank = 5, pieces = [4x8]>} {}

// -----

// expected-error @+1 {{topk: ratio must be in (0, 1], not 0}}
module attributes {c = #dist.topk<ratio = 0.0>} {}

// -----

module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node>} {
  func.func @f(%x: tensor<4x8xf16>) -> tensor<4x8xf16> {
    // expected-error @+1 {{'dist.all_reduce' op compresses f32 or bf16 values only, not 'f16'}}
    %0 = dist.all_reduce %x over ["dp"] sum {compression = #dist.int8_block} : tensor<4x8xf16> -> tensor<4x8xf16>
    return %0 : tensor<4x8xf16>
  }
}

// -----

// A compressed reduce_scatter's blocks are f32 (a bf16 bucket is an all_reduce's).
module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node>} {
  func.func @f(%x: tensor<4x8xbf16>) -> tensor<2x8xbf16> {
    // expected-error @+1 {{'dist.reduce_scatter' op compresses f32 values only, not 'bf16'}}
    %0 = dist.reduce_scatter %x over ["dp"] sum dim 0 {compression = #dist.int8_block} : tensor<4x8xbf16> -> tensor<2x8xbf16>
    return %0 : tensor<2x8xbf16>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node>} {
  func.func @f(%x: tensor<4x8xf32>, %q: tensor<48xf32>) -> tensor<2x8xf32> {
    // expected-error @+1 {{'dist.reduce_scatter' op #dist.powersgd compresses all_reduce only (a reduce_scatter's blocks are no matrices): use #dist.int8_block or #dist.topk}}
    %0 = dist.reduce_scatter %x over ["dp"] sum dim 0 feedback %q : tensor<48xf32> {compression = #dist.powersgd<rank = 2>} : tensor<4x8xf32> -> tensor<2x8xf32>
    return %0 : tensor<2x8xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node>} {
  func.func @f(%x: tensor<2x8xf32>, %q: tensor<48xf32>) -> tensor<2x8xf32> {
    // expected-error @+1 {{'dist.all_reduce' op #dist.powersgd rank 4 is above the smaller dimension of its 2x8 matrix}}
    %0 = dist.all_reduce %x over ["dp"] sum feedback %q : tensor<48xf32> {compression = #dist.powersgd<rank = 4>} : tensor<2x8xf32> -> tensor<2x8xf32>
    return %0 : tensor<2x8xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node>} {
  func.func @f(%x: tensor<36xf32>, %q: tensor<48xf32>) -> tensor<36xf32> {
    // expected-error @+1 {{'dist.all_reduce' op #dist.powersgd pieces hold 35 values, the reduction 36}}
    %0 = dist.all_reduce %x over ["dp"] sum feedback %q : tensor<48xf32> {compression = #dist.powersgd<rank = 2, pieces = [4x8, 3]>} : tensor<36xf32> -> tensor<36xf32>
    return %0 : tensor<36xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node>} {
  func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    // expected-error @+1 {{'dist.all_reduce' op #dist.powersgd needs its state operand (each matrix's Q)}}
    %0 = dist.all_reduce %x over ["dp"] sum {compression = #dist.powersgd<rank = 2>} : tensor<4x8xf32> -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node>} {
  func.func @f(%x: tensor<32xf32>, %q: tensor<48xf32>) -> tensor<32xf32> {
    // expected-error @+1 {{'dist.all_reduce' op #dist.powersgd on a value of rank 1 needs its pieces listed (a matrix is RxC)}}
    %0 = dist.all_reduce %x over ["dp"] sum feedback %q : tensor<48xf32> {compression = #dist.powersgd<rank = 2>} : tensor<32xf32> -> tensor<32xf32>
    return %0 : tensor<32xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<dp = 2 : inter_node>} {
  func.func @f(%x: tensor<4x8xf32>, %q: tensor<40xf32>) -> tensor<4x8xf32> {
    // expected-error @+1 {{'dist.all_reduce' op codec state 'tensor<40xf32>' must be tensor<48xf32> or tensor<48xbf16> (hpc::dist::codecStateElements)}}
    %0 = dist.all_reduce %x over ["dp"] sum feedback %q : tensor<40xf32> {compression = #dist.powersgd<rank = 2>} : tensor<4x8xf32> -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}

// -----

// expected-error @+1 {{powersgd: unknown parameter 'size' (pieces, error_feedback)}}
module attributes {c = #dist.powersgd<rank = 2, size = 3>} {}
