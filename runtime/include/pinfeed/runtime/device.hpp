#pragma once
/// @file device.hpp
/// CUDA device discovery and device selection. A machine with no driver or no device is a normal
/// state: pinfeed then runs every stage on the host.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pinfeed {

struct device_properties {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  std::size_t total_memory = 0;
  int async_engines = 0;  ///< copy engines: >= 1 lets copies overlap kernels
  int multiprocessors = 0;
  std::string pci_bus_id;  ///< "0000:3b:00.0": where the node plan finds the GPU in the topology
};

/// What the CUDA runtime reports on this machine.
struct cuda_status {
  bool usable = false;       ///< at least one device can be used
  std::string reason;        ///< why not, when !usable (e.g. CUDA's "insufficient driver" message)
  int runtime_version = 0;   ///< e.g. 13000
  int driver_version = 0;    ///< 0 when no driver is installed
  std::vector<device_properties> devices;
};

/// Discovers devices once per process (thread-safe) and logs the outcome once at info level.
/// Never throws: a failure to find a device is reported in the result.
[[nodiscard]] const cuda_status& cuda_devices();

/// The multiprocessors of CUDA device `device` as discovery found them, 1 when it knows none: a
/// lookup, no CUDA call, so kernels can size their grids on every launch (and during capture).
[[nodiscard]] int multiprocessor_count(int device) noexcept;

/// Which device a loader runs on.
struct device_choice {
  enum class kind { cpu, cuda } where = kind::cpu;
  int index = -1;
  [[nodiscard]] bool is_cuda() const noexcept { return where == kind::cuda; }
  [[nodiscard]] std::string to_string() const;
};

/// A device request, its spelling checked once, when it is made:
///   "auto"       - the only CUDA device this process sees (a launcher's CUDA_VISIBLE_DEVICES per
///                  rank), else CUDA device LOCAL_RANK (or 0), if any device is usable; else the CPU;
///   "cpu"        - the CPU;
///   "cuda"       - CUDA device 0;   "cuda:N" - CUDA device N;
///   "local_rank" - CUDA device $LOCAL_RANK (then OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID).
/// Made from text implicitly, so options read naturally (`o.device = "cpu"`); a bad spelling
/// throws std::invalid_argument quoting it.
class device_spec {
 public:
  enum class kind { automatic, cpu, cuda, local_rank };
  device_spec() noexcept = default;  ///< auto
  device_spec(std::string_view text);  // NOLINT(google-explicit-constructor): a spelling is a spec
  device_spec(const char* text) : device_spec(text != nullptr ? std::string_view(text) : std::string_view("(null)")) {}  // NOLINT
  device_spec(const std::string& text) : device_spec(std::string_view(text)) {}  // NOLINT
  [[nodiscard]] static device_spec cuda(int index);
  [[nodiscard]] kind which() const noexcept { return kind_; }
  [[nodiscard]] int index() const noexcept { return index_; }  ///< the N of cuda:N (0 for "cuda")
  /// The spelling ("auto", "cpu", "cuda:N", "local_rank").
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const device_spec&, const device_spec&) = default;

 private:
  kind kind_ = kind::automatic;
  int index_ = 0;
};

/// Resolves a request against what cuda_devices() found and the launcher's environment. Throws
/// std::runtime_error when a CUDA device is requested that does not exist or is not usable
/// (naming the index and CUDA's reason), or local_rank without a local rank in the environment.
[[nodiscard]] device_choice resolve_device(const device_spec& request);

/// The local rank from the launcher's environment (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
/// SLURM_LOCALID: the launchers of distributed_from_env(), in its order), or -1 if unset. Throws
/// std::invalid_argument naming a variable that is not a non-negative integer.
[[nodiscard]] int local_rank_from_env();

}  // namespace pinfeed
