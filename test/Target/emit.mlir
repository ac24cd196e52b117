// RUN: hpc-opt %s --emit=llvm | FileCheck %s --check-prefix=LLVM
// RUN: rm -f %t.o %t.o.safetensors
// RUN: hpc-opt %s --emit=obj -o %t.o 2>&1 | FileCheck %s --check-prefix=OBJ
// RUN: test -s %t.o
// RUN: %python -c "import json,struct,sys; d=open(sys.argv[1],'rb').read(); n=struct.unpack('<Q',d[:8])[0]; h=json.loads(d[8:8+n]); print((8+n)%%64, h['w']['dtype'], h['w']['shape'], h['w']['data_offsets'], len(d)-8-n)" %t.o.safetensors | FileCheck %s --check-prefix=WEIGHTS
// RUN: not hpc-opt %s --emit=exe 2>&1 | FileCheck %s --check-prefix=NOOUT
// RUN: not hpc-opt %s --emit=wasm -o %t.x 2>&1 | FileCheck %s --check-prefix=BADEMIT

// LLVM: @hpc_manifest = constant [{{[0-9]+}} x i8] c"{\22arena_bytes\22:16,
// LLVM: define void @hpc_program_run(ptr %0)
// LLVM-NEXT: call void @hpcrt_mul(ptr %0, i32 0, ptr @ids0, ptr null, ptr null, ptr null)
// LLVM-NEXT: ret void

// OBJ: hpc-opt: wrote {{.*}}.o and {{.*}}.o.safetensors (arena 16 bytes)

// The data section starts 64-byte aligned and holds the 4 floats.
// WEIGHTS: 0 F32 [4] [0, 16] 16

// NOOUT: hpc-opt: error: --emit=exe needs an output file (-o FILE)
// BADEMIT: hpc-opt: error: --emit must be mlir, llvm, obj or exe, not 'wasm'

func.func @main(%x: tensor<4xf32> {hpc.name = "x"}) -> (tensor<4xf32> {hpc.name = "y"}) {
  %w = hpc.weight "w" : tensor<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
  %0 = hpc.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
