// SPDX-License-Identifier: Apache-2.0
#include "xlb/xlbctl/verbs.h"

#include <array>
#include <cstdlib>
#include <map>
#include <string>

#include "nouns/nouns.h"

namespace xlb::xlbctl {

std::span<const Noun> nouns() {
    static const std::array<Noun, 15> all{
        noun::status(),  noun::host(),   noun::vip(),          noun::backend(), noun::conntrack(),
        noun::capture(), noun::top(),    noun::stats(),        noun::table(),   noun::lookup(),
        noun::quic(),    noun::reload(), noun::export_state(), noun::diff(),    noun::fleet(),
    };
    return all;
}

namespace {

struct Row {
    const VerbSpec* spec = nullptr;
    std::string name;  // "status", "vip add"
};

const std::map<Verb, Row>& rows() {
    static const std::map<Verb, Row> by_verb = [] {
        std::map<Verb, Row> m;
        for (const Noun& noun : nouns())
            for (const VerbSpec& verb : noun.verbs)
                m[verb.verb] =
                    Row{&verb, noun.is_verb() ? std::string(noun.name)
                                              : std::string(noun.name) + " " + verb.name};
        return m;
    }();
    return by_verb;
}

}  // namespace

const VerbSpec& verb_spec(Verb verb) {
    const auto it = rows().find(verb);
    // Every Verb has its row: the tests hold the table against the enum.
    if (it == rows().end()) std::abort();
    return *it->second.spec;
}

const char* verb_name(Verb verb) {
    const auto it = rows().find(verb);
    return it == rows().end() ? "?" : it->second.name.c_str();
}

}  // namespace xlb::xlbctl
