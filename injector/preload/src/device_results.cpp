// The device results still to come (device_results.h).
#include "device_results.h"

namespace fpscope::inject {

void DeviceResults::begin(uint64_t seq, std::string kernel, std::string where, const char* layer) {
  Launch& l = launches_[seq];
  l.kernel = std::move(kernel);
  l.where = std::move(where);
  if (layer) l.layer = layer;
}

uint64_t DeviceResults::queue(Tensor t) {
  const uint64_t token = next_token_++;
  ++launches_[t.seq].outstanding;
  tensors_[token] = std::move(t);
  return token;
}

void DeviceResults::unqueue(uint64_t token) {
  auto it = tensors_.find(token);
  if (it == tensors_.end()) return;
  const uint64_t seq = it->second.seq;
  tensors_.erase(it);
  if (auto l = launches_.find(seq); l != launches_.end()) --l->second.outstanding;
  settle(seq);
}

std::vector<std::pair<DeviceResults::Tensor, TensorStats>> DeviceResults::written(uint64_t seq,
                                                                                    bool host_inputs_finite) {
  Launch& l = launches_[seq];
  l.written = true;
  l.inputs_finite = l.inputs_finite && host_inputs_finite;
  return std::move(l.early);
}

std::optional<DeviceResults::Tensor> DeviceResults::take(uint64_t token) {
  auto it = tensors_.find(token);
  if (it == tensors_.end()) return std::nullopt;
  Tensor t = std::move(it->second);
  tensors_.erase(it);
  return t;
}

DeviceResults::Tensor* DeviceResults::queued(uint64_t token) {
  auto it = tensors_.find(token);
  return it == tensors_.end() ? nullptr : &it->second;
}

DeviceResults::Launch* DeviceResults::launch(uint64_t seq) {
  auto it = launches_.find(seq);
  return it == launches_.end() ? nullptr : &it->second;
}

void DeviceResults::handled(uint64_t seq) {
  if (auto it = launches_.find(seq); it != launches_.end()) --it->second.outstanding;
  settle(seq);
}

void DeviceResults::settle(uint64_t seq) {
  auto it = launches_.find(seq);
  if (it != launches_.end() && it->second.written && it->second.outstanding <= 0) launches_.erase(it);
}

bool DeviceResults::input_queued(uint64_t seq) const {
  for (const auto& [token, t] : tensors_)
    if (t.seq == seq && t.role == wire::Role::Input) return true;
  return false;
}

}  // namespace fpscope::inject
