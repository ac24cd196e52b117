//===- Emit.cpp - LLVM IR, object emission and linking --------------------===//
//
// Object code comes from LLVM's own code generator for the host; the link
// uses the system C++ driver with the runtime's link line, which the runtime's
// build writes to lib/hpc-opt/hpcrt-link.txt. The compiler finds that file
// relative to the object its code lives in (bin/hpc-opt, or
// lib/libHPCOptPipeline.so in an embedding compiler) as
// ../lib/hpc-opt/hpcrt-link.txt, the same in the build tree and in an
// install prefix, so an installed compiler links the installed runtime.
// HPC_LINKER and HPC_RUNTIME_LINK_FILE in the environment override the
// driver and the file.
//
//===----------------------------------------------------------------------===//

#include "hpc/Target/Emit.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Module.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <cstdlib>
#include <mutex>

#include <dlfcn.h>
#include <link.h>

using namespace mlir;

void hpc::registerTargetTranslations(DialectRegistry &registry) {
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

/// The host target machine, or null with `error` set.
static std::unique_ptr<llvm::TargetMachine> hostMachine(std::string &error) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  llvm::Triple triple(llvm::sys::getProcessTriple());
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  llvm::TargetOptions options;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, "generic", "", options, llvm::Reloc::PIC_));
}

SmallVector<ModuleOp> hpc::pipelineStageModules(ModuleOp module) {
  SmallVector<ModuleOp> stages;
  for (auto nested : module.getBody()->getOps<ModuleOp>())
    if (nested->hasAttr("hpc.stage"))
      stages.push_back(nested);
  return stages;
}

std::string hpc::programManifest(ModuleOp module) {
  auto global = module.lookupSymbol<LLVM::GlobalOp>("hpc_manifest");
  if (!global)
    return "";
  auto text = llvm::dyn_cast_or_null<StringAttr>(global.getValueOrNull());
  if (!text)
    return "";
  StringRef value = text.getValue();
  return value.rtrim('\0').str(); // stored NUL-terminated
}

/// What must agree between two programs sharing a state: each input and
/// state entry with its tensor (dtype, shape, region, offset), the
/// weights, the mesh and the state's size.
static llvm::json::Value stateLayout(const llvm::json::Object &m) {
  const llvm::json::Array *tensors = m.getArray("tensors");
  auto resolved = [&](const char *key) {
    llvm::json::Array out;
    if (const llvm::json::Array *list = m.getArray(key))
      for (const llvm::json::Value &v : *list) {
        const llvm::json::Object *entry = v.getAsObject();
        if (!entry)
          continue;
        // The step inputs the runtime feeds by name (hpc.lr, hpc.clip_norm,
        // ...) may differ; the data inputs may not.
        if (std::optional<StringRef> name = entry->getString("name");
            StringRef(key) == "inputs" && name && name->starts_with("hpc."))
          continue;
        llvm::json::Object copy = *entry;
        std::optional<int64_t> id = entry->getInteger("tensor");
        if (tensors && id && *id >= 0 && size_t(*id) < tensors->size())
          copy["tensor"] = (*tensors)[*id];
        out.push_back(std::move(copy));
      }
    return out;
  };
  llvm::json::Object layout{{"inputs", resolved("inputs")}, {"state", resolved("state")}};
  for (const char *key : {"weights", "mesh", "state_bytes", "zero"})
    if (const llvm::json::Value *v = m.get(key))
      layout[key] = *v;
  return layout;
}

bool hpc::sameStateLayout(StringRef manifestA, StringRef manifestB, std::string &why) {
  auto a = llvm::json::parse(manifestA), b = llvm::json::parse(manifestB);
  if (!a || !b || !a->getAsObject() || !b->getAsObject()) {
    if (!a)
      llvm::consumeError(a.takeError());
    if (!b)
      llvm::consumeError(b.takeError());
    why = "a manifest does not parse";
    return false;
  }
  llvm::json::Value la = stateLayout(*a->getAsObject()), lb = stateLayout(*b->getAsObject());
  if (la == lb)
    return true;
  for (const char *key : {"inputs", "state", "weights", "mesh", "state_bytes", "zero"}) {
    const llvm::json::Value *x = la.getAsObject()->get(key), *y = lb.getAsObject()->get(key);
    if ((x == nullptr) != (y == nullptr) || (x && !(*x == *y))) {
      why = std::string("their ") + key + " differ";
      return false;
    }
  }
  why = "their layouts differ";
  return false;
}

/// Links `conservative`'s program into `linked` as hpc_conservative_manifest
/// and hpc_conservative_run.
static bool linkConservative(llvm::Module &linked, ModuleOp conservative,
                             llvm::LLVMContext &context, std::string &error) {
  auto part = translateModuleToLLVMIR(conservative, context, "hpc_conservative");
  llvm::GlobalVariable *manifest = part ? part->getGlobalVariable("hpc_manifest") : nullptr;
  llvm::Function *run = part ? part->getFunction("hpc_program_run") : nullptr;
  if (!manifest || !run) {
    error = "cannot translate the conservative program to LLVM IR";
    return false;
  }
  manifest->setName("hpc_conservative_manifest");
  run->setName("hpc_conservative_run");
  if (llvm::Linker(linked).linkInModule(std::move(part))) {
    error = "cannot link the conservative program";
    return false;
  }
  return true;
}

static std::unique_ptr<llvm::Module> translate(ModuleOp module,
                                               llvm::LLVMContext &context,
                                               std::string &error,
                                               ModuleOp conservative) {
  SmallVector<ModuleOp> stages = hpc::pipelineStageModules(module);
  if (stages.empty()) {
    auto llvmModule = translateModuleToLLVMIR(module, context, "hpc_program");
    if (!llvmModule)
      error = "cannot translate the lowered module to LLVM IR";
    if (llvmModule && conservative &&
        !linkConservative(*llvmModule, conservative, context, error))
      return nullptr;
    return llvmModule;
  }
  // One object with every stage's program: stage K's manifest and run
  // function renamed hpc_manifest_stageK and hpc_program_run_stageK, and
  // the table the runtime picks its stage's from (hpcrt.h, "Pipeline
  // programs").
  auto linked = std::make_unique<llvm::Module>("hpc_program", context);
  llvm::Linker linker(*linked);
  auto *ptr = llvm::PointerType::getUnqual(context);
  std::vector<llvm::Constant *> manifests, programs;
  for (auto [k, stage] : llvm::enumerate(stages)) {
    auto part = translateModuleToLLVMIR(stage, context, "hpc_stage");
    if (!part) {
      error = "cannot translate stage " + std::to_string(k) + "'s module to LLVM IR";
      return nullptr;
    }
    std::string suffix = "_stage" + std::to_string(k);
    llvm::GlobalVariable *manifest = part->getGlobalVariable("hpc_manifest");
    llvm::Function *run = part->getFunction("hpc_program_run");
    if (!manifest || !run) {
      error = "stage " + std::to_string(k) + "'s module has no hpc_manifest or hpc_program_run";
      return nullptr;
    }
    manifest->setName("hpc_manifest" + suffix);
    run->setName("hpc_program_run" + suffix);
    if (linker.linkInModule(std::move(part))) {
      error = "cannot link stage " + std::to_string(k) + "'s program";
      return nullptr;
    }
    manifests.push_back(linked->getGlobalVariable("hpc_manifest" + suffix));
    programs.push_back(linked->getFunction("hpc_program_run" + suffix));
  }
  auto table = [&](const char *name, std::vector<llvm::Constant *> &entries) {
    auto *type = llvm::ArrayType::get(ptr, entries.size());
    new llvm::GlobalVariable(*linked, type, /*isConstant=*/true,
                             llvm::GlobalValue::ExternalLinkage,
                             llvm::ConstantArray::get(type, entries), name);
  };
  table("hpc_stage_manifests", manifests);
  table("hpc_stage_programs", programs);
  auto *i32 = llvm::Type::getInt32Ty(context);
  new llvm::GlobalVariable(*linked, i32, true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(i32, stages.size()), "hpc_stage_count");
  return linked;
}

LogicalResult hpc::emitLLVMIR(ModuleOp module, llvm::raw_ostream &os,
                              std::string &error, ModuleOp conservative) {
  llvm::LLVMContext context;
  auto llvmModule = translate(module, context, error, conservative);
  if (!llvmModule)
    return failure();
  llvmModule->print(os, nullptr);
  return success();
}

LogicalResult hpc::emitObjectFile(ModuleOp module, const std::string &path,
                                  std::string &error, ModuleOp conservative) {
  llvm::LLVMContext context;
  auto llvmModule = translate(module, context, error, conservative);
  if (!llvmModule)
    return failure();
  auto machine = hostMachine(error);
  if (!machine)
    return failure();
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(machine->getTargetTriple());
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write '" + path + "': " + ec.message();
    return failure();
  }
  llvm::legacy::PassManager pm;
  if (machine->addPassesToEmitFile(pm, os, nullptr,
                                   llvm::CodeGenFileType::ObjectFile)) {
    error = "the host target cannot emit object files";
    return failure();
  }
  pm.run(*llvmModule);
  os.close();
  if (os.has_error()) {
    error = "cannot write '" + path + "': " + os.error().message();
    return failure();
  }
  return success();
}

/// The executable or shared library this code is linked into, resolved
/// (symbolic links followed); empty if the dynamic loader cannot say.
static std::string compilerObjectPath() {
  Dl_info info;
  struct link_map *map = nullptr;
  std::string path;
  if (dladdr1(reinterpret_cast<void *>(&compilerObjectPath), &info,
              reinterpret_cast<void **>(&map), RTLD_DL_LINKMAP) &&
      map && map->l_name && map->l_name[0])
    path = map->l_name;
  else // the main program: the loader knows it only by argv[0]
    path = llvm::sys::fs::getMainExecutable(
        nullptr, reinterpret_cast<void *>(&compilerObjectPath));
  SmallString<256> real;
  if (path.empty() || llvm::sys::fs::real_path(path, real))
    return path;
  return std::string(real);
}

/// The runtime's link line: $HPC_RUNTIME_LINK_FILE, else
/// <directory of the compiler's object>/../lib/hpc-opt/hpcrt-link.txt.
static std::string runtimeLinkFile() {
  if (const char *env = std::getenv("HPC_RUNTIME_LINK_FILE"))
    return env;
  SmallString<256> path(compilerObjectPath());
  llvm::sys::path::remove_filename(path);
  llvm::sys::path::append(path, "..", "lib", "hpc-opt", "hpcrt-link.txt");
  llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
  return std::string(path);
}

LogicalResult hpc::linkExecutable(const std::string &objectPath,
                                  const std::string &outputPath,
                                  std::string &error) {
  std::string linkFile = runtimeLinkFile();
  auto buffer = llvm::MemoryBuffer::getFile(linkFile);
  if (!buffer) {
    error = "cannot read the runtime link line '" + linkFile + "': " +
            buffer.getError().message() +
            " (is libhpcrt built or installed beside the compiler? "
            "HPC_RUNTIME_LINK_FILE names another)";
    return failure();
  }
  // Words that are neither options nor absolute paths (libhpcrt.a) are
  // relative to the link file's own directory.
  SmallString<256> linkDir(linkFile);
  llvm::sys::path::remove_filename(linkDir);
  const char *driverEnv = std::getenv("HPC_LINKER");
  std::string driverName = driverEnv ? driverEnv : "c++";
  auto driver = llvm::sys::findProgramByName(driverName);
  if (!driver) {
    error = "linker driver '" + driverName + "' not found on PATH";
    return failure();
  }
  std::vector<std::string> args{*driver, objectPath, "-o", outputPath};
  SmallVector<StringRef> words;
  (*buffer)->getBuffer().split(words, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef w : words) {
    w = w.trim();
    if (w.empty())
      continue;
    if (w.starts_with("-") || llvm::sys::path::is_absolute(w)) {
      args.push_back(w.str());
      continue;
    }
    SmallString<256> resolved(linkDir);
    llvm::sys::path::append(resolved, w);
    llvm::sys::path::remove_dots(resolved, /*remove_dot_dot=*/true);
    args.push_back(std::string(resolved));
  }
  std::vector<StringRef> argRefs(args.begin(), args.end());
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*driver, argRefs, std::nullopt, {}, 0, 0,
                                     &message);
  if (rc != 0) {
    error = "linking '" + outputPath + "' failed" +
            (message.empty() ? "" : ": " + message) + " (command: " +
            llvm::join(args, " ") + ")";
    return failure();
  }
  return success();
}
