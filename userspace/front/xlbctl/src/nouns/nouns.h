// SPDX-License-Identifier: Apache-2.0
// The nouns of xlbctl, each in its own file here (verbs.h: what a row holds).
#pragma once

#include "xlb/xlbctl/verbs.h"

namespace xlb::xlbctl::noun {

const Noun& status();
const Noun& host();
const Noun& vip();
const Noun& backend();
const Noun& conntrack();
const Noun& capture();
const Noun& top();
const Noun& stats();
const Noun& table();
const Noun& lookup();
const Noun& quic();
const Noun& reload();
const Noun& export_state();
const Noun& diff();
const Noun& fleet();

}  // namespace xlb::xlbctl::noun
