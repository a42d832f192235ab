#include "harness/sweep/case_plan.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "common/units.h"
#include "harness/run/json_text.h"

namespace gmb {

namespace {

std::string sha256_hex(const void* data, std::size_t size, const std::function<bool(EVP_MD_CTX*)>& feed = {}) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      (size && EVP_DigestUpdate(ctx.get(), data, size) != 1) || (feed && !feed(ctx.get())) ||
      EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1)
    throw CasePlanError("SHA-256 failed (OpenSSL)");
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

// What a workload's input file contributes to the id: its content. A pipe or device cannot be
// read twice; it is named only.
nlohmann::json input_json(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {{"path", path}, {"regular_file", false}};
  return {{"bytes", static_cast<std::uint64_t>(st.st_size)}, {"sha256", file_sha256(path)}};
}

const char* device_name(DeviceChoice d) { return d == DeviceChoice::Cuda ? "cuda" : "sim"; }

}  // namespace

std::string file_sha256(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CasePlanError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  int read_errno = 0;
  const std::string hex = sha256_hex(nullptr, 0, [&](EVP_MD_CTX* ctx) {
    std::vector<char> buf(std::size_t(1) << 20);
    for (;;) {
      const ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        read_errno = errno;
        return true;
      }
      if (n == 0) return true;
      if (EVP_DigestUpdate(ctx, buf.data(), static_cast<std::size_t>(n)) != 1) return false;
    }
  });
  ::close(fd);
  if (read_errno) throw CasePlanError(fmt::format("{}: cannot read: {}", path, std::strerror(read_errno)));
  return hex;
}

std::string case_id(const nlohmann::json& spec) {
  const std::string text = json_text(spec);
  return sha256_hex(text.data(), text.size()).substr(0, 16);
}

std::vector<PlannedCase> plan_cases(const Config& config, DeviceChoice device, const std::vector<Bytes>& capacities,
                                    bool sweep) {
  // Each workload's part of the spec, its input files hashed once.
  std::vector<nlohmann::json> workloads;
  for (const auto& w : config.workloads) {
    nlohmann::json inputs = nlohmann::json::array();
    for (const auto& f : w.input_files) inputs.push_back(input_json(f));
    workloads.push_back({{"kind", w.kind}, {"params", w.params_json}, {"inputs", inputs}});
  }
  const nlohmann::json run{{"on_oom", to_string(config.run.on_oom)},
                           {"repeat", config.run.repeat},
                           {"timeline", config.run.timeline},
                           {"max_steps", config.run.max_steps}};
  std::vector<PlannedCase> cases;
  for (Bytes cap : capacities) {
    const std::string at = sweep ? " @ " + format_bytes(cap) : "";
    for (std::size_t wi = 0; wi < config.workloads.size(); ++wi)
      for (std::size_t ai = 0; ai < config.allocators.size(); ++ai) {
        const AllocatorSpec& a = config.allocators[ai];
        PlannedCase c;
        c.index = cases.size();
        c.workload_index = wi;
        c.allocator_index = ai;
        c.capacity_bytes = cap;
        c.at = at;
        c.label = a.display_label() + " x " + config.workloads[wi].kind + at;
        c.spec = {{"tool", "gpumembench"},
                  {"version", GMB_VERSION},
                  {"device", {{"kind", device_name(device)}, {"capacity_bytes", cap}}},
                  {"capacity_in_label", sweep},
                  {"allocator", {{"name", a.name}, {"options", a.options}, {"label", a.label}}},
                  {"workload", workloads[wi]},
                  {"run", run}};
        // (A case that replays a snapshot's recorded run places segments as the driver did: its
        // figures are not those of the same options placed otherwise.)
        if (replays_recorded_run(a, config.workloads[wi])) c.spec["replays_recorded_run"] = true;
        c.id = case_id(c.spec);
        cases.push_back(std::move(c));
      }
  }
  return cases;
}

nlohmann::json plan_json(const PlannedCase& c) {
  return {{"index", c.index}, {"id", c.id}, {"label", c.label}, {"spec", c.spec}};
}

}  // namespace gmb
