#include "sim/scenario/hf_reader.hpp"

#include "sim/scenario/scalar_values.hpp"
#include "sim/scenario/yaml_document.hpp"

namespace zsim {

std::optional<std::pair<std::string, YAML::Node>> HfReader::first(std::initializer_list<const char*> keys) const {
  for (const char* k : keys) {
    YAML::Node v = root_[k];
    if (v.IsDefined() && !v.IsNull()) return std::make_pair(std::string(k), v);
  }
  return std::nullopt;
}

std::optional<std::int64_t> HfReader::integer(std::initializer_list<const char*> keys) const {
  auto kv = first(keys);
  if (!kv) return std::nullopt;
  auto r = kv->second.IsScalar() ? parse_integer(kv->second.Scalar()) : std::nullopt;
  if (!r)
    throw InputError(location_of(kv->second, file_, kv->first), "expected an integer, got " + describe_node(kv->second));
  return r;
}

std::optional<bool> HfReader::boolean(const char* key) const {
  auto kv = first({key});
  if (!kv) return std::nullopt;
  auto r = kv->second.IsScalar() ? parse_bool(kv->second.Scalar()) : std::nullopt;
  if (!r) throw InputError(location_of(kv->second, file_, key), "expected true or false, got " + describe_node(kv->second));
  return r;
}

std::optional<double> HfReader::real(std::initializer_list<const char*> keys) const {
  auto kv = first(keys);
  if (!kv) return std::nullopt;
  auto r = kv->second.IsScalar() ? parse_real(kv->second.Scalar()) : std::nullopt;
  if (!r) throw InputError(location_of(kv->second, file_, kv->first), "expected a number, got " + describe_node(kv->second));
  return r;
}

std::string HfReader::string(const char* key) const {
  auto kv = first({key});
  if (!kv) return "";
  if (!kv->second.IsScalar())
    throw InputError(location_of(kv->second, file_, key), "expected a string, got " + describe_node(kv->second));
  return kv->second.Scalar();
}

std::int64_t HfReader::required(std::initializer_list<const char*> keys) const {
  auto v = integer(keys);
  if (!v) throw InputError({file_, 1, 1, *keys.begin()}, "Hugging Face config lacks '" + std::string(*keys.begin()) + "'");
  return *v;
}

SourceLocation HfReader::where(const char* key) const {
  auto kv = first({key});
  return kv ? location_of(kv->second, file_, key) : SourceLocation{file_, 1, 1, key};
}

}  // namespace zsim
