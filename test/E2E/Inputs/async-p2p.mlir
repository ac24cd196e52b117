// A per-rank program on two ranks with every asynchronous collective, the
// synchronous and asynchronous point-to-point forms, and compute between a
// start and its wait (see async-p2p.test).
module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {
  func.func @main(%x: tensor<4x8xf32> {hpc.name = "x"})
      -> (tensor<4x8xf32> {hpc.name = "sum"}, tensor<2x8xf32> {hpc.name = "scattered"},
          tensor<4x8xf32> {hpc.name = "gathered"}, tensor<4x4xf32> {hpc.name = "exchanged"},
          tensor<2x8xf32> {hpc.name = "broadcast"}, tensor<2x8xf32> {hpc.name = "next"},
          tensor<2x8xf32> {hpc.name = "next_async"}, tensor<2x8xf32> {hpc.name = "halo_next"},
          tensor<2x8xf32> {hpc.name = "halo_prev"}) {
    %t = dist.all_reduce_start %x over ["tp"] sum : tensor<4x8xf32> -> !dist.token<tensor<4x8xf32>>
    %y = hpc.relu %x : tensor<4x8xf32>
    %s = dist.wait %t : !dist.token<tensor<4x8xf32>> -> tensor<4x8xf32>
    %sum = hpc.add %s, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %trs = dist.reduce_scatter_start %x over ["tp"] sum dim 0 : tensor<4x8xf32> -> !dist.token<tensor<2x8xf32>>
    %rs = dist.wait %trs : !dist.token<tensor<2x8xf32>> -> tensor<2x8xf32>
    %p = dist.all_slice %x over ["tp"] dim 0 : tensor<4x8xf32> -> tensor<2x8xf32>
    %tag = dist.all_gather_start %p over ["tp"] dim 0 : tensor<2x8xf32> -> !dist.token<tensor<4x8xf32>>
    %ta2a = dist.all_to_all_start %p over ["tp"] split 1 concat 0 : tensor<2x8xf32> -> !dist.token<tensor<4x4xf32>>
    %tbc = dist.broadcast_start %p over ["tp"] root 1 : tensor<2x8xf32> -> !dist.token<tensor<2x8xf32>>
    %ag = dist.wait %tag : !dist.token<tensor<4x8xf32>> -> tensor<4x8xf32>
    %a2a = dist.wait %ta2a : !dist.token<tensor<4x4xf32>> -> tensor<4x4xf32>
    %bc = dist.wait %tbc : !dist.token<tensor<2x8xf32>> -> tensor<2x8xf32>
    dist.send %p along "tp" offset -1 : tensor<2x8xf32>
    %r = dist.recv along "tp" offset 1 : tensor<2x8xf32>
    %tr = dist.recv_start along "tp" offset 1 : !dist.token<tensor<2x8xf32>>
    %ts = dist.send_start %p along "tp" offset -1 : tensor<2x8xf32> -> !dist.token
    dist.wait %ts : !dist.token
    %r2 = dist.wait %tr : !dist.token<tensor<2x8xf32>> -> tensor<2x8xf32>
    // A halo exchange: receives started both ways, then the sends. Every
    // rank's receive is outstanding while it sends, so a started receive
    // must not hold up the send behind it.
    %h1 = dist.recv_start along "tp" offset 1 : !dist.token<tensor<2x8xf32>>
    %h2 = dist.recv_start along "tp" offset -1 : !dist.token<tensor<2x8xf32>>
    dist.send %p along "tp" offset 1 : tensor<2x8xf32>
    dist.send %p along "tp" offset -1 : tensor<2x8xf32>
    %next = dist.wait %h1 : !dist.token<tensor<2x8xf32>> -> tensor<2x8xf32>
    %prev = dist.wait %h2 : !dist.token<tensor<2x8xf32>> -> tensor<2x8xf32>
    return %sum, %rs, %ag, %a2a, %bc, %r, %r2, %next, %prev
        : tensor<4x8xf32>, tensor<2x8xf32>, tensor<4x8xf32>, tensor<4x4xf32>, tensor<2x8xf32>,
          tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
  }
}
