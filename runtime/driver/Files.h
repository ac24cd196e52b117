//===- Files.h - directories, durable writes, mapped files ------*- C++ -*-===//
//
// The file system pieces the commands share: creating directories, the file
// names outputs are written under, listing and removing directories, read-
// only mappings of input files, and writes that survive a crash: a file is
// written and fsync-ed, an atomic replacement goes through a temporary file
// in the same directory that is renamed over the target, and the directory
// is fsync-ed after. Every failure is an hpcrt::Error naming the path.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_DRIVER_FILES_H
#define HPCRT_DRIVER_FILES_H

#include "../core/Context.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hpcrt::driver {

/// Creates `dir` and its parents (mkdir -p); `what` names it in errors.
void makeDirs(const std::string &dir, const std::string &what = "output directory");

/// A name made of [A-Za-z0-9._-] (every other character becomes '_').
std::string fileNameFor(const std::string &name);
/// The file names (without ".npy") of the outputs, in output order, as
/// `run` writes them: fileNameFor(name), "output_<k>" for an empty one,
/// "_<n>" appended where two would collide.
std::vector<std::string> outputFileNames(const Context &ctx);

bool isDirectory(const std::string &path);
bool pathExists(const std::string &path);
/// The entries of `dir` (without "." and ".."), sorted; empty when `dir`
/// does not exist.
std::vector<std::string> listDirectory(const std::string &dir);
/// Removes a file or a directory tree (rm -rf; a missing path is fine).
void removeTree(const std::string &path);
/// fsync of a file or a directory.
void syncPath(const std::string &path);
/// A new directory `<prefix>XXXXXX` (mkdtemp); returns its path.
std::string makeTempDirectory(const std::string &prefix);

/// A piece of a file being written: `bytes` bytes at `data`.
struct Piece {
  const void *data;
  size_t bytes;
};
/// Creates `path` (it must not exist), writes the pieces, fsyncs it.
/// Returns the number of bytes written.
uint64_t writeDurably(const std::string &path, const std::vector<Piece> &pieces);
/// The file writeAtomically(path) replaces: `path`, or the regular file a
/// symbolic link at `path` leads to (the link stays). Fails with "PATH:
/// exists and is not a regular file (refusing to replace it)" for a
/// device, FIFO, socket, directory, dangling link or link to one of these:
/// a rename would put a file in its place (as root, /dev/full itself).
std::string replaceableTarget(const std::string &path);
/// Replaces replaceableTarget(path) atomically: the pieces go to a
/// temporary file next to it (fsync-ed), which is renamed over it; then
/// the directory is fsync-ed.
void writeAtomically(const std::string &path, const std::vector<Piece> &pieces);

/// A read-only mapping of a whole regular file (an empty file maps to no
/// bytes), opened through InputFile: a FIFO, device or directory is the
/// error "<path>: not a regular file", never a blocked open.
class MappedFile {
public:
  explicit MappedFile(const std::string &path);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  const uint8_t *data() const { return static_cast<const uint8_t *>(base_); }
  size_t size() const { return size_; }
  const std::string &path() const { return path_; }

private:
  std::string path_;
  void *base_ = nullptr;
  size_t size_ = 0;
};

} // namespace hpcrt::driver

#endif // HPCRT_DRIVER_FILES_H
