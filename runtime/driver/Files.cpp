//===- Files.cpp - directories, durable and atomic writes, mapped files ---===//
//
// POSIX file system calls behind Files.h: mkdir, opendir/readdir, unlink and
// rmdir for rm -rf (without following symbolic links), mkdtemp/mkstemp for
// temporary names, write loops that retry short writes, fsync of files and
// directories, rename for atomic replacement (of regular files only: lstat
// first), mmap for reading (of a file opened through InputFile: regular
// files only, a FIFO does not block).
//
//===----------------------------------------------------------------------===//

#include "Files.h"

#include "../io/InputFile.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hpcrt::driver {

namespace {
std::string errnoText() { return strerror(errno); }

std::string parentOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

void writeAll(int fd, const void *data, size_t bytes, const std::string &path) {
  const char *p = static_cast<const char *>(data);
  while (bytes > 0) {
    ssize_t n = write(fd, p, bytes);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      fail(path + ": write error: " + errnoText());
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

/// Writes the pieces to the open `fd`, fsyncs and closes it.
uint64_t writePieces(int fd, const std::vector<Piece> &pieces, const std::string &path) {
  uint64_t total = 0;
  try {
    for (const Piece &p : pieces) {
      writeAll(fd, p.data, p.bytes, path);
      total += p.bytes;
    }
    if (fsync(fd) != 0)
      fail(path + ": fsync failed: " + errnoText());
  } catch (...) {
    close(fd);
    throw;
  }
  if (close(fd) != 0)
    fail(path + ": write error: " + errnoText());
  return total;
}
} // namespace

void makeDirs(const std::string &dir, const std::string &what) {
  std::string cur;
  size_t i = 0;
  while (i <= dir.size()) {
    size_t j = dir.find('/', i);
    if (j == std::string::npos)
      j = dir.size();
    cur = dir.substr(0, j);
    if (!cur.empty() && mkdir(cur.c_str(), 0777) != 0 && errno != EEXIST)
      fail(dir + ": cannot create " + what + ": " + errnoText());
    i = j + 1;
  }
  if (!isDirectory(dir))
    fail(dir + ": not a directory");
}

std::string fileNameFor(const std::string &name) {
  std::string s;
  for (char ch : name)
    s += (isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_') ? ch
                                                                                          : '_';
  return s;
}

std::vector<std::string> outputFileNames(const Context &ctx) {
  std::set<std::string> used;
  std::vector<std::string> names;
  for (size_t k = 0; k < ctx.outputList().size(); ++k) {
    std::string base = fileNameFor(ctx.outputList()[k].name);
    if (base.empty())
      base = "output_" + std::to_string(k);
    std::string file = base;
    for (int n = 1; used.count(file); ++n)
      file = base + "_" + std::to_string(n);
    used.insert(file);
    names.push_back(file);
  }
  return names;
}

bool isDirectory(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool pathExists(const std::string &path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

std::vector<std::string> listDirectory(const std::string &dir) {
  std::vector<std::string> names;
  DIR *d = opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT)
      return names;
    fail(dir + ": cannot read directory: " + errnoText());
  }
  while (struct dirent *e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..")
      names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

void removeTree(const std::string &path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return;
    fail(path + ": cannot remove: " + errnoText());
  }
  if (S_ISDIR(st.st_mode)) {
    for (const std::string &n : listDirectory(path))
      removeTree(path + "/" + n);
    if (rmdir(path.c_str()) != 0)
      fail(path + ": cannot remove: " + errnoText());
  } else if (unlink(path.c_str()) != 0) {
    fail(path + ": cannot remove: " + errnoText());
  }
}

void syncPath(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(path + ": cannot open for fsync: " + errnoText());
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0 && err != EINVAL)
    fail(path + ": fsync failed: " + strerror(err));
}

std::string makeTempDirectory(const std::string &prefix) {
  std::string templ = prefix + "XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data()))
    fail(templ + ": cannot create a temporary directory: " + errnoText());
  return buf.data();
}

uint64_t writeDurably(const std::string &path, const std::vector<Piece> &pieces) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    fail(path + ": cannot create: " + errnoText());
  return writePieces(fd, pieces, path);
}

std::string replaceableTarget(const std::string &path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return path;
    fail(path + ": cannot write: " + errnoText());
  }
  if (S_ISREG(st.st_mode))
    return path;
  if (S_ISLNK(st.st_mode) && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    char *real = realpath(path.c_str(), nullptr);
    if (!real)
      fail(path + ": cannot resolve the link: " + errnoText());
    std::string target = real;
    free(real);
    return target;
  }
  fail(path + ": exists and is not a regular file (refusing to replace it)");
}

void writeAtomically(const std::string &userPath, const std::vector<Piece> &pieces) {
  const std::string path = replaceableTarget(userPath);
  std::string dir = parentOf(path);
  size_t slash = path.rfind('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string templ = dir + "/." + base + ".tmp-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  int fd = mkstemp(buf.data());
  if (fd < 0)
    fail(path + ": cannot create a temporary file next to it: " + errnoText());
  std::string tmp = buf.data();
  try {
    fchmod(fd, 0644);
    writePieces(fd, pieces, path);
    if (rename(tmp.c_str(), path.c_str()) != 0)
      fail(path + ": cannot rename " + tmp + " over it: " + errnoText());
  } catch (...) {
    unlink(tmp.c_str());
    throw;
  }
  syncPath(dir);
}

MappedFile::MappedFile(const std::string &path) : path_(path) {
  InputFile file(path);
  size_ = static_cast<size_t>(file.size());
  if (size_ > 0) {
    base_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
    if (base_ == MAP_FAILED) {
      base_ = nullptr;
      fail(path + ": cannot map: " + errnoText());
    }
  }
}

MappedFile::~MappedFile() {
  if (base_)
    munmap(base_, size_);
}

} // namespace hpcrt::driver
