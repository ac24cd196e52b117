//===- capi-test.c - tests of HPC-Opt's C API -----------------------------===//
//
// A C program that links libHPCOptCAPI alone and calls every function of
// include/hpc-c and the upstream C API it carries, with their errors: a
// failed check prints its line and the test exits 1. One ctest test per
// group (test/CAPI/CMakeLists.txt):
//
//   hpc-capi-test TEST MODEL WORKDIR
//
// TEST is version, dialects, registration, import or compile; MODEL is
// examples/mlp.onnx (input x f32 [4, 784], output probs f32 [4, 10]);
// WORKDIR is a directory the test may write (created if missing).
// HPC_EXPECTED_VERSION is CMake's project version. With HPC_CAPI_MPIRUN set
// (mpirun and its flags, without -n), `compile` also runs the executable it
// writes for dp=2 on 2 ranks against the single-rank one.
//
//===----------------------------------------------------------------------===//

#include "hpc-c/Compile.h"
#include "hpc-c/Dialects.h"
#include "hpc-c/Import.h"
#include "hpc-c/Registration.h"

#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/RegisterEverything.h"
#include "mlir-c/Support.h"
#include "mlir-c/Transforms.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef HPC_EXPECTED_VERSION
#error "HPC_EXPECTED_VERSION must be defined (CMake's project version)"
#endif

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

/// CHECK that `text` (a NUL-terminated string) contains `part`.
#define CHECK_CONTAINS(text, part)                                             \
  do {                                                                         \
    const char *t_ = (text);                                                   \
    if (!t_ || !strstr(t_, (part))) {                                          \
      fprintf(stderr, "%s:%d: check failed: \"%s\" not in:\n%s\n", __FILE__,   \
              __LINE__, (part), t_ ? t_ : "(null)");                           \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

static const char *modelPath;
static const char *workDir;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// A growing text buffer, filled by MLIR's string callbacks.
typedef struct {
  char *data;
  size_t size;
  size_t capacity;
} Buffer;

static void bufferAppend(Buffer *b, const char *data, size_t n) {
  if (b->size + n + 1 > b->capacity) {
    size_t capacity = b->capacity ? b->capacity : 256;
    while (capacity < b->size + n + 1)
      capacity *= 2;
    char *grown = realloc(b->data, capacity);
    if (!grown) {
      fprintf(stderr, "out of memory\n");
      exit(1);
    }
    b->data = grown;
    b->capacity = capacity;
  }
  memcpy(b->data + b->size, data, n);
  b->size += n;
  b->data[b->size] = '\0';
}

static void bufferClear(Buffer *b) {
  b->size = 0;
  if (b->data)
    b->data[0] = '\0';
}

static void bufferFree(Buffer *b) {
  free(b->data);
  b->data = NULL;
  b->size = b->capacity = 0;
}

static void appendCallback(MlirStringRef text, void *userData) {
  bufferAppend((Buffer *)userData, text.data, text.length);
}

/// Diagnostics of a context, collected as text ("error: ..." lines).
typedef struct {
  Buffer text;
  int errors;
} Diagnostics;

static MlirLogicalResult collectDiagnostic(MlirDiagnostic diagnostic,
                                           void *userData) {
  Diagnostics *d = (Diagnostics *)userData;
  if (mlirDiagnosticGetSeverity(diagnostic) == MlirDiagnosticError) {
    ++d->errors;
    bufferAppend(&d->text, "error: ", 7);
  }
  mlirDiagnosticPrint(diagnostic, appendCallback, &d->text);
  bufferAppend(&d->text, "\n", 1);
  return mlirLogicalResultSuccess(); // handled: nothing printed
}

/// Prints the diagnostics an expected error gave, for the test's log.
static void showDiagnostics(const char *what, const Diagnostics *d) {
  printf("-- %s:\n%s", what, d->text.data ? d->text.data : "(none)\n");
}

static void diagnosticsClear(Diagnostics *d) {
  bufferClear(&d->text);
  d->errors = 0;
}

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

/// A context with HPC-Opt's dialects (and upstream's), diagnostics to `d`.
static MlirContext createContext(Diagnostics *d) {
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  hpcRegisterAllDialects(registry);
  MlirContext ctx = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  if (d)
    mlirContextAttachDiagnosticHandler(ctx, collectDiagnostic, d, NULL);
  return ctx;
}

/// The module's text, large constants elided.
static void printModule(MlirModule module, Buffer *out) {
  MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
  mlirOpPrintingFlagsElideLargeElementsAttrs(flags, 16);
  bufferClear(out);
  mlirOperationPrintWithFlags(mlirModuleGetOperation(module), flags,
                              appendCallback, out);
  mlirOpPrintingFlagsDestroy(flags);
}

static char *joinPath(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *path = malloc(n);
  snprintf(path, n, "%s/%s", dir, name);
  return path;
}

static int isExecutableFile(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & S_IXUSR) &&
         st.st_size > 0;
}

/// Writes a float32 .npy file of shape [rows, cols] holding `value`.
static int writeNpy(const char *path, int rows, int cols, float value) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return 0;
  char header[128];
  int n = snprintf(header, sizeof header,
                   "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }",
                   rows, cols);
  // Magic, version 1.0, header length; header padded with spaces to a
  // multiple of 64 bytes (with the 10 bytes before it) and ended by '\n'.
  int total = ((10 + n + 1 + 63) / 64) * 64;
  int headerLength = total - 10;
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  unsigned char len[2] = {(unsigned char)(headerLength & 0xff),
                          (unsigned char)(headerLength >> 8)};
  fwrite(len, 1, 2, f);
  fwrite(header, 1, (size_t)n, f);
  for (int i = n; i < headerLength - 1; ++i)
    fputc(' ', f);
  fputc('\n', f);
  for (int i = 0; i < rows * cols; ++i)
    fwrite(&value, sizeof value, 1, f);
  return fclose(f) == 0;
}

/// Reads a float32 .npy file of `count` values; 0 on any mismatch.
static int readNpy(const char *path, float *values, size_t count) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return 0;
  unsigned char head[10];
  int ok = fread(head, 1, 10, f) == 10 && memcmp(head, "\x93NUMPY", 6) == 0 &&
           head[6] == 1;
  if (ok) {
    size_t headerLength = (size_t)head[8] | ((size_t)head[9] << 8);
    char header[512];
    ok = headerLength < sizeof header &&
         fread(header, 1, headerLength, f) == headerLength;
    if (ok) {
      header[headerLength] = '\0';
      ok = strstr(header, "'<f4'") != NULL;
    }
  }
  ok = ok && fread(values, sizeof(float), count, f) == count && fgetc(f) == EOF;
  fclose(f);
  return ok;
}

/// The standard output of `BINARY info`, in `out`.
static void runInfo(const char *binary, Buffer *out) {
  bufferClear(out);
  size_t n = strlen(binary) + 16;
  char *command = malloc(n);
  snprintf(command, n, "'%s' info", binary);
  FILE *p = popen(command, "r");
  CHECK(p != NULL);
  if (p) {
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, p)) > 0)
      bufferAppend(out, chunk, got);
    CHECK(pclose(p) == 0);
  }
  free(command);
}

//===----------------------------------------------------------------------===//
// hpcGetVersion
//===----------------------------------------------------------------------===//

static void testVersion(void) {
  const char *version = hpcGetVersion();
  CHECK(version != NULL);
  if (version && strcmp(version, HPC_EXPECTED_VERSION) != 0) {
    fprintf(stderr, "hpcGetVersion() = '%s', CMake's project version '%s'\n",
            version, HPC_EXPECTED_VERSION);
    ++failures;
  }
  // The same static string every time.
  CHECK(hpcGetVersion() == version);
}

//===----------------------------------------------------------------------===//
// Dialect handles (hpc-c/Dialects.h)
//===----------------------------------------------------------------------===//

static void testDialects(void) {
  MlirDialectHandle hpc = mlirGetDialectHandle__hpc__();
  MlirDialectHandle dist = mlirGetDialectHandle__dist__();
  CHECK(mlirStringRefEqual(mlirDialectHandleGetNamespace(hpc), str("hpc")));
  CHECK(mlirStringRefEqual(mlirDialectHandleGetNamespace(dist), str("dist")));

  // Loaded into a bare context.
  MlirContext ctx = mlirContextCreate();
  CHECK(!mlirContextIsRegisteredOperation(ctx, str("hpc.relu")));
  MlirDialect hpcDialect = mlirDialectHandleLoadDialect(hpc, ctx);
  MlirDialect distDialect = mlirDialectHandleLoadDialect(dist, ctx);
  CHECK(!mlirDialectIsNull(hpcDialect));
  CHECK(!mlirDialectIsNull(distDialect));
  CHECK(mlirStringRefEqual(mlirDialectGetNamespace(hpcDialect), str("hpc")));
  CHECK(mlirStringRefEqual(mlirDialectGetNamespace(distDialect), str("dist")));
  CHECK(mlirContextIsRegisteredOperation(ctx, str("hpc.relu")));
  CHECK(mlirContextIsRegisteredOperation(ctx, str("hpc.matmul")));
  CHECK(mlirContextIsRegisteredOperation(ctx, str("dist.all_reduce")));
  // Loading again gives the same dialect.
  CHECK(mlirDialectEqual(mlirDialectHandleLoadDialect(hpc, ctx), hpcDialect));
  mlirContextDestroy(ctx);

  // Inserted into a registry: the context loads them on demand.
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirDialectHandleInsertDialect(hpc, registry);
  mlirDialectHandleInsertDialect(dist, registry);
  ctx = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  CHECK(mlirContextGetNumLoadedDialects(ctx) == 1); // builtin
  CHECK(!mlirDialectIsNull(mlirContextGetOrLoadDialect(ctx, str("hpc"))));
  CHECK(!mlirDialectIsNull(mlirContextGetOrLoadDialect(ctx, str("dist"))));
  CHECK(mlirDialectIsNull(mlirContextGetOrLoadDialect(ctx, str("nosuch"))));
  mlirContextDestroy(ctx);
}

//===----------------------------------------------------------------------===//
// hpcRegisterAllDialects, hpcRegisterAllPasses and the upstream C API
//===----------------------------------------------------------------------===//

/// Parses `pipeline` into a new pass manager of `ctx`; the parser's message
/// goes to `message`.
static MlirLogicalResult parsePipeline(MlirContext ctx, const char *pipeline,
                                       Buffer *message) {
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  bufferClear(message);
  MlirLogicalResult result = mlirParsePassPipeline(
      mlirPassManagerGetAsOpPassManager(pm), str(pipeline), appendCallback,
      message);
  mlirPassManagerDestroy(pm);
  return result;
}

/// Two collectives that undo each other (test/Dist/canonicalize.mlir).
static const char *kSliceGather =
    "module attributes {dist.mesh = #dist.mesh<tp = 2 : intra_node>} {\n"
    "  func.func @slice_gather(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {\n"
    "    %0 = dist.all_slice %x over [\"tp\"] dim 0 : tensor<8x8xf32> -> "
    "tensor<4x8xf32>\n"
    "    %1 = dist.all_gather %0 over [\"tp\"] dim 0 : tensor<4x8xf32> -> "
    "tensor<8x8xf32>\n"
    "    return %1 : tensor<8x8xf32>\n"
    "  }\n"
    "}\n";

/// A two-layer hpc MLP (test/Dist/partition.mlir).
static const char *kMLP =
    "func.func @main(%x: tensor<4x16xf32> {hpc.name = \"x\"}) -> "
    "(tensor<4x8xf32> {hpc.name = \"y\"}) {\n"
    "  %w1 = hpc.weight \"w1\" : tensor<16x32xf32> = dense<0.5>\n"
    "  %w2 = hpc.weight \"w2\" : tensor<32x8xf32> = dense<0.25>\n"
    "  %0 = hpc.matmul %x, %w1 : (tensor<4x16xf32>, tensor<16x32xf32>) -> "
    "tensor<4x32xf32>\n"
    "  %1 = hpc.relu %0 : tensor<4x32xf32>\n"
    "  %2 = hpc.matmul %1, %w2 : (tensor<4x32xf32>, tensor<32x8xf32>) -> "
    "tensor<4x8xf32>\n"
    "  return %2 : tensor<4x8xf32>\n"
    "}\n";

static void testRegistration(void) {
  Diagnostics diags = {{0}, 0};
  Buffer message = {0}, text = {0};

  // The dialects: hpc, dist and the upstream ones they are used with.
  MlirContext ctx = createContext(&diags);
  CHECK(mlirContextGetNumRegisteredDialects(ctx) >= 7);
  const char *dialects[] = {"hpc", "dist", "func", "tensor", "llvm", "shard"};
  for (size_t i = 0; i < sizeof dialects / sizeof *dialects; ++i) {
    if (mlirDialectIsNull(mlirContextGetOrLoadDialect(ctx, str(dialects[i])))) {
      fprintf(stderr, "dialect %s not registered\n", dialects[i]);
      ++failures;
    }
  }

  // Twice: registration is idempotent. Upstream's passes too (carried).
  hpcRegisterAllPasses();
  hpcRegisterAllPasses();
  mlirRegisterAllPasses();
  mlirRegisterTransformsPasses();

  CHECK(mlirLogicalResultIsSuccess(
      parsePipeline(ctx, "builtin.module(hpc-compile{mesh=dp=2})", &message)));
  CHECK(mlirLogicalResultIsSuccess(
      parsePipeline(ctx, "builtin.module(dist-partition)", &message)));
  CHECK(mlirLogicalResultIsSuccess(parsePipeline(
      ctx, "builtin.module(dist-propagate{mesh=dp=2},dist-partition,canonicalize,cse)",
      &message)));
  // Errors: the parser's message, a failure.
  CHECK(mlirLogicalResultIsFailure(
      parsePipeline(ctx, "builtin.module(hpc-no-such-pass)", &message)));
  CHECK_CONTAINS(message.data, "hpc-no-such-pass");
  CHECK(mlirLogicalResultIsFailure(
      parsePipeline(ctx, "builtin.module(hpc-compile{nonsense=1})", &message)));
  CHECK_CONTAINS(message.data, "nonsense");

  // Parse, run upstream's canonicalizer (dist's folds) and print.
  MlirModule module = mlirModuleCreateParse(ctx, str(kSliceGather));
  CHECK(!mlirModuleIsNull(module));
  if (!mlirModuleIsNull(module)) {
    MlirPassManager pm = mlirPassManagerCreate(ctx);
    CHECK(mlirLogicalResultIsSuccess(mlirParsePassPipeline(
        mlirPassManagerGetAsOpPassManager(pm), str("builtin.module(canonicalize)"),
        appendCallback, &message)));
    CHECK(mlirLogicalResultIsSuccess(
        mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module))));
    printModule(module, &text);
    CHECK_CONTAINS(text.data, "return %arg0");
    CHECK(!strstr(text.data, "dist.all_slice"));
    mlirPassManagerDestroy(pm);
    mlirModuleDestroy(module);
  }

  // HPC-Opt's passes through the C API: partition the MLP over dp=2.
  module = mlirModuleCreateParse(ctx, str(kMLP));
  CHECK(!mlirModuleIsNull(module));
  if (!mlirModuleIsNull(module)) {
    MlirPassManager pm = mlirPassManagerCreate(ctx);
    CHECK(mlirLogicalResultIsSuccess(mlirParsePassPipeline(
        mlirPassManagerGetAsOpPassManager(pm),
        str("builtin.module(dist-propagate{mesh=dp=2},dist-partition)"),
        appendCallback, &message)));
    CHECK(mlirLogicalResultIsSuccess(
        mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module))));
    printModule(module, &text);
    CHECK_CONTAINS(text.data, "dist.all_slice");
    CHECK_CONTAINS(text.data, "dist.all_gather");
    CHECK_CONTAINS(text.data, "tensor<2x16xf32>");
    mlirPassManagerDestroy(pm);
    mlirModuleDestroy(module);
  }

  // A parse error is a diagnostic and a null module.
  diagnosticsClear(&diags);
  module = mlirModuleCreateParse(ctx, str("func.func @f() { hpc.nosuch }"));
  CHECK(mlirModuleIsNull(module));
  CHECK(diags.errors >= 1);
  CHECK_CONTAINS(diags.text.data, "hpc.nosuch");

  mlirContextDestroy(ctx);
  bufferFree(&message);
  bufferFree(&text);
  bufferFree(&diags.text);
}

//===----------------------------------------------------------------------===//
// hpcImportONNXFile
//===----------------------------------------------------------------------===//

static void testImport(void) {
  Diagnostics diags = {{0}, 0};
  Buffer text = {0};
  MlirContext ctx = createContext(&diags);

  // The MLP, weights read.
  MlirModule module = hpcImportONNXFile(ctx, str(modelPath), str("x=4,784"), false);
  CHECK(!mlirModuleIsNull(module));
  CHECK(diags.errors == 0);
  if (!mlirModuleIsNull(module)) {
    CHECK(mlirOperationVerify(mlirModuleGetOperation(module)));
    printModule(module, &text);
    CHECK_CONTAINS(text.data, "func.func @main");
    CHECK_CONTAINS(text.data, "tensor<4x784xf32>");
    CHECK_CONTAINS(text.data, "hpc.weight");
    CHECK_CONTAINS(text.data, "dense_resource"); // weights read (elided)
    mlirModuleDestroy(module);
  }

  // Shapes only; entries separated by ';', empty ones ignored.
  module = hpcImportONNXFile(ctx, str(modelPath), str("x=4,784;"), true);
  CHECK(!mlirModuleIsNull(module));
  if (!mlirModuleIsNull(module)) {
    printModule(module, &text);
    CHECK_CONTAINS(text.data, "tensor<4x784xf32>");
    CHECK_CONTAINS(text.data, "hpc.weight");
    CHECK(!strstr(text.data, "dense_resource"));
    mlirModuleDestroy(module);
  }
  CHECK(diags.errors == 0);

  // A missing file: a null module, one error naming it.
  diagnosticsClear(&diags);
  char *missing = joinPath(workDir, "no-such-model.onnx");
  module = hpcImportONNXFile(ctx, str(missing), str("x=4,784"), false);
  CHECK(mlirModuleIsNull(module));
  CHECK(diags.errors == 1);
  CHECK_CONTAINS(diags.text.data, "no-such-model.onnx");
  showDiagnostics("a missing model", &diags);
  free(missing);

  // Malformed shapes: a bad dimension, no '=', an empty name.
  const char *badShapes[] = {"x=4,abc", "x", "=4,784", "x=4,784;y=-1"};
  for (size_t i = 0; i < sizeof badShapes / sizeof *badShapes; ++i) {
    diagnosticsClear(&diags);
    module = hpcImportONNXFile(ctx, str(modelPath), str(badShapes[i]), false);
    if (!mlirModuleIsNull(module)) {
      fprintf(stderr, "input shape '%s' accepted\n", badShapes[i]);
      ++failures;
      mlirModuleDestroy(module);
      continue;
    }
    CHECK(diags.errors == 1);
    CHECK_CONTAINS(diags.text.data, "input shape");
    showDiagnostics(badShapes[i], &diags);
  }
  diagnosticsClear(&diags);
  module = hpcImportONNXFile(ctx, str(modelPath), str("x=4,abc"), false);
  CHECK(mlirModuleIsNull(module));
  CHECK_CONTAINS(diags.text.data, "x=4,abc");

  // Not a model: a file of other bytes.
  diagnosticsClear(&diags);
  char *junk = joinPath(workDir, "junk.onnx");
  FILE *f = fopen(junk, "wb");
  CHECK(f != NULL);
  if (f) {
    fputs("this is not a protobuf", f);
    fclose(f);
  }
  module = hpcImportONNXFile(ctx, str(junk), str(""), false);
  CHECK(mlirModuleIsNull(module));
  CHECK(diags.errors == 1);
  CHECK_CONTAINS(diags.text.data, "junk.onnx");
  showDiagnostics("not a model", &diags);
  free(junk);

  // The context still works after the errors.
  module = hpcImportONNXFile(ctx, str(modelPath), str("x=2,784"), true);
  CHECK(!mlirModuleIsNull(module));
  if (!mlirModuleIsNull(module))
    mlirModuleDestroy(module);

  mlirContextDestroy(ctx);
  bufferFree(&text);
  bufferFree(&diags.text);
}

//===----------------------------------------------------------------------===//
// hpcCompileToExecutable
//===----------------------------------------------------------------------===//

/// Compiles a fresh import of the model with `options` to `output`.
static MlirLogicalResult compileModel(MlirContext ctx, const char *output,
                                      const char *options) {
  MlirModule module = hpcImportONNXFile(ctx, str(modelPath), str("x=4,784"), false);
  CHECK(!mlirModuleIsNull(module));
  if (mlirModuleIsNull(module))
    return mlirLogicalResultFailure();
  MlirLogicalResult result =
      hpcCompileToExecutable(module, str(output), str(options));
  mlirModuleDestroy(module);
  return result;
}

/// Runs the compiled MLP on x = 1, under `launcher` (a command prefix, or
/// "") into WORKDIR/`outName`, and checks its output: 4 rows of 10
/// probabilities, each row summing to 1, left in `values`.
static void checkRun(const char *launcher, const char *binary, const char *outName,
                     float values[40]) {
  char *input = joinPath(workDir, "x.npy");
  char *outDir = joinPath(workDir, outName);
  char *probs = joinPath(outDir, "probs.npy");
  CHECK(writeNpy(input, 4, 784, 1.0f));
  remove(probs);
  size_t n = strlen(launcher) + strlen(binary) + strlen(input) + strlen(outDir) + 64;
  char *command = malloc(n);
  snprintf(command, n, "%s '%s' run --input x='%s' --output-dir '%s'", launcher,
           binary, input, outDir);
  int status = system(command);
  if (status != 0) {
    fprintf(stderr, "'%s' exited with status %d\n", command, status);
    ++failures;
  }
  memset(values, 0, 40 * sizeof(float));
  CHECK(readNpy(probs, values, 40));
  for (int row = 0; row < 4; ++row) {
    double sum = 0;
    for (int i = 0; i < 10; ++i) {
      float v = values[row * 10 + i];
      CHECK(isfinite(v) && v >= 0.0f && v <= 1.0f);
      sum += v;
    }
    if (fabs(sum - 1.0) > 1e-5) {
      fprintf(stderr, "row %d of %s sums to %g\n", row, probs, sum);
      ++failures;
    }
  }
  free(command);
  free(probs);
  free(outDir);
  free(input);
}

static void testCompile(void) {
  Diagnostics diags = {{0}, 0};
  MlirContext ctx = createContext(&diags);
  char *single = joinPath(workDir, "mlp.bin");
  char *dp2 = joinPath(workDir, "mlp-dp2.bin");
  remove(single);
  remove(dp2);

  // Bad option strings: a failure and an error, nothing written, and the
  // process goes on. "nonsense" is no option; "mesh=dp=" names no size;
  // a loss needs train; "train=maybe" is no boolean.
  const char *badOptions[] = {"nonsense=1", "mesh=dp=", "loss=mse:probs,t",
                              "train=maybe", "mesh=dp=2 {"};
  for (size_t i = 0; i < sizeof badOptions / sizeof *badOptions; ++i) {
    diagnosticsClear(&diags);
    MlirModule module =
        hpcImportONNXFile(ctx, str(modelPath), str("x=4,784"), false);
    CHECK(!mlirModuleIsNull(module));
    if (mlirModuleIsNull(module))
      continue;
    MlirLogicalResult result =
        hpcCompileToExecutable(module, str(single), str(badOptions[i]));
    if (!mlirLogicalResultIsFailure(result)) {
      fprintf(stderr, "options '%s' accepted\n", badOptions[i]);
      ++failures;
    }
    if (diags.errors < 1) {
      fprintf(stderr, "options '%s': no error diagnostic\n", badOptions[i]);
      ++failures;
    }
    showDiagnostics(badOptions[i], &diags);
    mlirModuleDestroy(module);
  }
  CHECK(access(single, F_OK) != 0);
  MlirModule nullModule = {NULL};
  CHECK(mlirLogicalResultIsFailure(
      hpcCompileToExecutable(nullModule, str(single), str(""))));
  diagnosticsClear(&diags);
  CHECK(mlirLogicalResultIsFailure(compileModel(ctx, single, "nonsense=1")));
  CHECK_CONTAINS(diags.text.data, "nonsense");
  // A combination the flow cannot run, named in the options' terms.
  diagnosticsClear(&diags);
  CHECK(mlirLogicalResultIsFailure(
      compileModel(ctx, single, "zero=1 train=true loss=mse:probs,t")));
  CHECK_CONTAINS(diags.text.data, "zero shards a train step's state");
  showDiagnostics("zero=1 without a mesh", &diags);
  // A plan searched for a cluster runs 2 micro-batches: the C API has no
  // model of one micro-batch to compile (hpc::FlowOptions::reimport), and
  // says what to do instead.
  diagnosticsClear(&diags);
  CHECK(mlirLogicalResultIsFailure(compileModel(
      ctx, single, "cluster=dgx-a100-80g:1 train=true loss=mse:probs,t micro-batches=2")));
  CHECK_CONTAINS(diags.text.data, "the plan runs 2 micro-batches");
  showDiagnostics("a plan of 2 micro-batches", &diags);
  CHECK(access(single, F_OK) != 0);

  // One rank: an executable that runs.
  diagnosticsClear(&diags);
  CHECK(mlirLogicalResultIsSuccess(compileModel(ctx, single, "")));
  CHECK(diags.errors == 0);
  if (diags.errors)
    fprintf(stderr, "%s", diags.text.data);
  CHECK(isExecutableFile(single));
  float oneRank[40] = {0};
  if (isExecutableFile(single))
    checkRun("", single, "out", oneRank);

  // A mesh, in the same context.
  diagnosticsClear(&diags);
  CHECK(mlirLogicalResultIsSuccess(compileModel(ctx, dp2, "mesh=dp=2")));
  CHECK(diags.errors == 0);
  if (diags.errors)
    fprintf(stderr, "%s", diags.text.data);
  CHECK(isExecutableFile(dp2));
  Buffer info = {0};
  runInfo(dp2, &info);
  CHECK_CONTAINS(info.data, "mesh: dp=2 (inter_node); 2 ranks");
  // Under mpirun with 2 ranks (HPC_CAPI_MPIRUN, the launcher without -n):
  // the single-rank binary's outputs (rtol 1e-5, atol 1e-6).
  const char *mpirun = getenv("HPC_CAPI_MPIRUN");
  if (mpirun && *mpirun && isExecutableFile(dp2)) {
    size_t n = strlen(mpirun) + 8;
    char *launcher = malloc(n);
    snprintf(launcher, n, "%s -n 2", mpirun);
    float twoRanks[40];
    checkRun(launcher, dp2, "out-dp2", twoRanks);
    for (int i = 0; i < 40; ++i) {
      if (fabsf(twoRanks[i] - oneRank[i]) > 1e-6f + 1e-5f * fabsf(oneRank[i])) {
        fprintf(stderr, "probs[%d]: %g on 2 ranks, %g on one\n", i, twoRanks[i],
                oneRank[i]);
        ++failures;
        break;
      }
    }
    free(launcher);
  } else {
    printf("note: HPC_CAPI_MPIRUN not set: the dp=2 executable is not run\n");
  }

  // Several options, a 2-D mesh; a train step (TARGET a new input), as
  // `info` shows.
  const char *more[] = {"mesh=dp=2,tp=2 async-collectives=true",
                        "train=true loss=mse:probs,t optimizer=adamw lr=0.01"};
  const char *moreInfo[] = {"mesh: dp=2 (inter_node), tp=2 (intra_node); 4 ranks",
                            "fc0.weight.exp_avg_sq: f32 [256, 784] optimizer"};
  for (size_t i = 0; i < sizeof more / sizeof *more; ++i) {
    diagnosticsClear(&diags);
    char *output = joinPath(workDir, i == 0 ? "mlp-2d.bin" : "mlp-train.bin");
    remove(output);
    if (!mlirLogicalResultIsSuccess(compileModel(ctx, output, more[i]))) {
      fprintf(stderr, "options '%s' failed:\n%s", more[i],
              diags.text.data ? diags.text.data : "");
      ++failures;
    }
    CHECK(isExecutableFile(output));
    if (isExecutableFile(output)) {
      runInfo(output, &info);
      CHECK_CONTAINS(info.data, moreInfo[i]);
    }
    free(output);
  }

  // An output path that cannot be written (below a regular file).
  diagnosticsClear(&diags);
  char *file = joinPath(workDir, "a-file");
  FILE *f = fopen(file, "w");
  CHECK(f != NULL);
  if (f)
    fclose(f);
  char *unwritable = joinPath(file, "mlp.bin");
  CHECK(mlirLogicalResultIsFailure(compileModel(ctx, unwritable, "")));
  CHECK(diags.errors >= 1);
  CHECK_CONTAINS(diags.text.data, "a-file");
  showDiagnostics("an unwritable output path", &diags);

  bufferFree(&info);
  free(unwritable);
  free(file);
  free(dp2);
  free(single);
  mlirContextDestroy(ctx);
  bufferFree(&diags.text);
}

//===----------------------------------------------------------------------===//

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr,
            "usage: %s version|dialects|registration|import|compile|all MODEL "
            "WORKDIR\n",
            argv[0]);
    return 2;
  }
  const char *test = argv[1];
  modelPath = argv[2];
  workDir = argv[3];
  if (mkdir(workDir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "cannot create %s: %s\n", workDir, strerror(errno));
    return 2;
  }

  int all = strcmp(test, "all") == 0, known = 0;
  struct {
    const char *name;
    void (*run)(void);
  } tests[] = {{"version", testVersion},
               {"dialects", testDialects},
               {"registration", testRegistration},
               {"import", testImport},
               {"compile", testCompile}};
  for (size_t i = 0; i < sizeof tests / sizeof *tests; ++i) {
    if (!all && strcmp(test, tests[i].name) != 0)
      continue;
    known = 1;
    int before = failures;
    tests[i].run();
    printf("%s: %s\n", tests[i].name, failures == before ? "ok" : "FAILED");
  }
  if (!known) {
    fprintf(stderr, "unknown test '%s'\n", test);
    return 2;
  }
  return failures ? 1 : 0;
}
