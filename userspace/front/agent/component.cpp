// SPDX-License-Identifier: Apache-2.0
#include "xlb/agent/component.h"

namespace xlb::agent {

Result<void> Components::start(const std::function<void(const Error&)>& on_failure) {
    for (; started_ < parts_.size(); ++started_) {
        if (auto ok = parts_[started_]->start(); !ok) {
            if (on_failure) on_failure(ok.error());
            stop();
            return ok;
        }
    }
    return {};
}

void Components::stop() {
    while (started_ > 0) parts_[--started_]->stop();
}

std::vector<std::string> Components::running() const {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < started_; ++i) out.push_back(parts_[i]->name());
    return out;
}

}  // namespace xlb::agent
