#include "workspace/entry_stream.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/byte_names.h"
#include "core/json_parse.h"
#include "core/text.h"
#include "workspace/store_files.h"

namespace pulsebox::workspace {

namespace {

using nlohmann::json;

// The keys of an entry and of its snapshot, as entry_from_json reads them.
enum class Field {
  Unknown,
  Path,
  PathHex,
  Op,
  Mode,
  LinkTarget,
  LinkTargetHex,
  Blob,
  Size,
  BlobInode,
  MtimeNs,
  ContainsSecret,
  Snapshot,
  BaseBlob,
  BaseLink,
  BaseLinkHex,
  RedactedLink,
  RedactedLinkHex,
  BaseRedacted,
  BaseWithheld,
  // snapshot's own
  Type,
  Inode,
  Device,
  NewestCtimeNs,
  Sha256,
  ChangedDuringRun,
};

Field entry_field(std::string_view key) {
  static const std::pair<std::string_view, Field> kFields[] = {
      {"path", Field::Path},
      {"path_hex", Field::PathHex},
      {"op", Field::Op},
      {"mode", Field::Mode},
      {"link_target", Field::LinkTarget},
      {"link_target_hex", Field::LinkTargetHex},
      {"blob", Field::Blob},
      {"size", Field::Size},
      {"blob_inode", Field::BlobInode},
      {"mtime_ns", Field::MtimeNs},
      {"contains_secret", Field::ContainsSecret},
      {"snapshot", Field::Snapshot},
      {"base_blob", Field::BaseBlob},
      {"base_link", Field::BaseLink},
      {"base_link_hex", Field::BaseLinkHex},
      {"redacted_link", Field::RedactedLink},
      {"redacted_link_hex", Field::RedactedLinkHex},
      {"base_redacted", Field::BaseRedacted},
      {"base_withheld", Field::BaseWithheld},
  };
  for (const auto& [name, field] : kFields) {
    if (name == key) return field;
  }
  return Field::Unknown;
}

Field snapshot_field(std::string_view key) {
  static const std::pair<std::string_view, Field> kFields[] = {
      {"type", Field::Type},
      {"inode", Field::Inode},
      {"device", Field::Device},
      {"size", Field::Size},
      {"mtime_ns", Field::MtimeNs},
      {"newest_ctime_ns", Field::NewestCtimeNs},
      {"mode", Field::Mode},
      {"sha256", Field::Sha256},
      {"changed_during_run", Field::ChangedDuringRun},
  };
  for (const auto& [name, field] : kFields) {
    if (name == key) return field;
  }
  return Field::Unknown;
}

// A name and its "_hex" twin (core::get_name: the hex wins when present);
// which of them the entry had, its seen bits say.
struct NameField {
  std::string text, hex;
};

class EntryHandler : public nlohmann::json_sax<json> {
 public:
  EntryHandler(std::string_view key, const std::function<void(Entry&&)>& each)
      : key_(key), each_(each) {}

  EntryStream take() { return EntryStream{std::move(document_), std::move(problem_)}; }
  bool stopped_by_entry() const { return !problem_.empty(); }

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override {
    if (in_entry()) return entry_bool(v);
    return value(json(v));
  }
  bool number_integer(number_integer_t v) override {
    if (in_entry()) return entry_number(static_cast<std::uint64_t>(v), v);
    return value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (in_entry()) return entry_number(v, static_cast<std::int64_t>(v));
    return value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override {
    if (in_entry()) return wrong_type();
    return value(json(v));
  }
  bool string(string_t& v) override {
    if (in_entry()) return entry_string(v);
    return value(json(std::move(v)));
  }
  bool binary(binary_t& v) override { return value(json::binary(std::move(v))); }

  bool start_object(std::size_t) override {
    if (!deeper()) return false;
    if (skip_ > 0) return ++skip_, true;
    if (entry_level_ == 1 && field_ == Field::Snapshot) {
      // A second "snapshot" replaces the first, as in a parsed document.
      entry_level_ = 2;
      has_snapshot_ = true;
      entry_.snapshot = Snapshot{};
      snapshot_seen_ = 0;
      return true;
    }
    if (in_entry()) return skip_unread();
    if (in_stream_ && stack_.size() == 2) {  // an element of the entries' array
      begin_entry();
      return true;
    }
    return open(json::object());
  }
  bool end_object() override {
    --depth_;
    if (skip_ > 0) return --skip_, true;
    if (entry_level_ == 2) {
      entry_level_ = 1;
      return true;
    }
    if (entry_level_ == 1) return end_entry();
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (!deeper()) return false;
    if (skip_ > 0) return ++skip_, true;
    if (in_entry()) return skip_unread();
    // The array under the top-level object's key (a key left over from an
    // object inside a top-level array does not count).
    const bool stream = stack_.size() == 1 && stack_.back()->is_object() && pending_key_ == key_;
    if (!open(json::array())) return false;
    if (stream) in_stream_ = true;
    return true;
  }
  bool end_array() override {
    --depth_;
    if (skip_ > 0) return --skip_, true;
    if (in_stream_ && stack_.size() == 2) in_stream_ = false;
    stack_.pop_back();
    return true;
  }
  bool key(string_t& k) override {
    if (skip_ > 0) return true;
    if (entry_level_ == 1) {
      field_ = entry_field(k);
      field_name_ = k;
    } else if (entry_level_ == 2) {
      field_ = snapshot_field(k);
      field_name_ = "snapshot." + k;
    } else {
      // The top-level key twice: a parsed document keeps only its last
      // value, where the stream would have handed over both arrays' entries.
      if (stack_.size() == 1 && stack_.back()->is_object() && k == key_) {
        if (key_seen_) return stop("the key \"" + key_ + "\" appears twice");
        key_seen_ = true;
      }
      pending_key_ = std::move(k);
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool in_entry() const { return entry_level_ > 0 && skip_ == 0; }
  bool deeper() {
    // One over the limit stops the parse: the caller reads the file again
    // for parse_json's diagnostic, which names the depth.
    return ++depth_ <= static_cast<int>(core::kMaxJsonDepth);
  }
  // The object or array just opened inside an entry: skipped when its key
  // is not one this reader knows (as entry_from_json ignores it), else the
  // entry is unusable.
  bool skip_unread() {
    if (field_ != Field::Unknown) return wrong_type();
    skip_ = 1;
    return true;
  }

  bool open(json container) {
    json* placed = place(std::move(container));
    stack_.push_back(placed);
    return true;
  }
  bool value(json v) {
    if (skip_ > 0) return true;
    if (in_entry()) return wrong_type();
    place(std::move(v));
    return true;
  }
  json* place(json v) {
    if (stack_.empty()) {
      document_ = std::move(v);
      return &document_;
    }
    json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    json& slot = parent[pending_key_];
    slot = std::move(v);
    return &slot;
  }

  void begin_entry() {
    entry_ = Entry{};
    entry_level_ = 1;
    field_ = Field::Unknown;
    seen_ = snapshot_seen_ = 0;
    has_snapshot_ = false;
    path_ = link_target_ = base_link_ = redacted_link_ = NameField{};
  }

  void mark(Field field) { seen_ |= std::uint64_t{1} << static_cast<int>(field); }
  bool has(Field field) const {
    return (seen_ & (std::uint64_t{1} << static_cast<int>(field))) != 0;
  }

  bool wrong_type() {
    if (field_ == Field::Unknown) return true;  // not read: any type will do
    return stop("the entry's " + field_name_ + " has the wrong type");
  }
  bool stop(std::string why) {
    problem_ = std::move(why);
    return false;
  }

  // Copied, not moved out of the parser's buffer: a moved string keeps the
  // buffer's spare capacity, a few MB over 100,000 entries.
  bool entry_string(const std::string& v) {
    if (entry_level_ == 2 && field_ == Field::Type) {
      entry_.snapshot.type = node_type_from_string(v);
    } else if (entry_level_ == 1 && field_ == Field::Op) {
      entry_.op = op_from_string(v);
    } else if (std::string* slot = string_slot(); slot != nullptr) {
      *slot = v;
    } else {
      return wrong_type();
    }
    mark_field();
    return true;
  }
  // Where the current key's string goes; nullptr when it takes no string.
  std::string* string_slot() {
    if (entry_level_ == 2) return field_ == Field::Sha256 ? &entry_.snapshot.sha256 : nullptr;
    switch (field_) {
      case Field::Path:
        return &path_.text;
      case Field::PathHex:
        return &path_.hex;
      case Field::LinkTarget:
        return &link_target_.text;
      case Field::LinkTargetHex:
        return &link_target_.hex;
      case Field::BaseLink:
        return &base_link_.text;
      case Field::BaseLinkHex:
        return &base_link_.hex;
      case Field::RedactedLink:
        return &redacted_link_.text;
      case Field::RedactedLinkHex:
        return &redacted_link_.hex;
      case Field::Blob:
        return &entry_.blob;
      case Field::BaseBlob:
        return &entry_.base_blob;
      default:
        return nullptr;
    }
  }

  bool entry_number(std::uint64_t u, std::int64_t i) {
    std::uint64_t* as_unsigned = nullptr;
    std::int64_t* as_signed = nullptr;
    unsigned* as_mode = nullptr;
    Snapshot& s = entry_.snapshot;
    const bool in_snapshot = entry_level_ == 2;
    switch (field_) {
      case Field::Inode:
        as_unsigned = &s.inode;
        break;
      case Field::Device:
        as_unsigned = &s.device;
        break;
      case Field::NewestCtimeNs:
        as_signed = &s.newest_ctime_ns;
        break;
      case Field::BlobInode:
        as_unsigned = &entry_.blob_inode;
        break;
      case Field::Size:
        as_unsigned = in_snapshot ? &s.size : &entry_.size;
        break;
      case Field::MtimeNs:
        as_signed = in_snapshot ? &s.mtime_ns : &entry_.mtime_ns;
        break;
      case Field::Mode:
        as_mode = in_snapshot ? &s.mode : &entry_.mode;
        break;
      default:
        return wrong_type();
    }
    if (as_unsigned != nullptr) *as_unsigned = u;
    if (as_signed != nullptr) *as_signed = i;
    if (as_mode != nullptr) *as_mode = static_cast<unsigned>(u);
    mark_field();
    return true;
  }

  bool entry_bool(bool v) {
    if (entry_level_ == 2 && field_ == Field::ChangedDuringRun) {
      entry_.snapshot.changed_during_run = v;
    } else if (entry_level_ == 1 && field_ == Field::ContainsSecret) {
      entry_.contains_secret = v;
    } else if (entry_level_ == 1 && field_ == Field::BaseRedacted) {
      entry_.base_redacted = v;
    } else if (entry_level_ == 1 && field_ == Field::BaseWithheld) {
      entry_.base_withheld = v;
    } else {
      return wrong_type();
    }
    mark_field();
    return true;
  }

  // The snapshot's fields are counted apart (some share names with the
  // entry's).
  void mark_field() {
    (entry_level_ == 2 ? snapshot_seen_ : seen_) |= std::uint64_t{1} << static_cast<int>(field_);
  }

  // core::get_name: the hex form wins; a missing name is a missing key.
  bool resolve(const NameField& name, Field text, Field hex, const char* key, bool required,
               std::string& out) {
    if (has(hex)) {
      auto bytes = core::from_hex(name.hex);
      if (!bytes) return stop(std::string(key) + "_hex is not hex");
      out = std::move(*bytes);
      return true;
    }
    if (has(text)) {
      out = name.text;
      return true;
    }
    if (required) return stop(std::string("key '") + key + "' not found");
    return true;
  }

  bool end_entry() {
    entry_level_ = 0;
    for (const auto& [field, key] : {std::pair{Field::Op, "op"},
                                     {Field::Mode, "mode"},
                                     {Field::Blob, "blob"},
                                     {Field::Size, "size"}}) {
      if (!has(field)) return stop(std::string("key '") + key + "' not found");
    }
    if (!has_snapshot_) return stop("key 'snapshot' not found");
    for (const auto& [field, key] : {std::pair{Field::Type, "type"},
                                     {Field::Inode, "inode"},
                                     {Field::Device, "device"},
                                     {Field::Size, "size"},
                                     {Field::MtimeNs, "mtime_ns"},
                                     {Field::Mode, "mode"},
                                     {Field::Sha256, "sha256"}}) {
      if ((snapshot_seen_ & (std::uint64_t{1} << static_cast<int>(field))) == 0) {
        return stop(std::string("key 'snapshot.") + key + "' not found");
      }
    }
    if (!resolve(path_, Field::Path, Field::PathHex, "path", true, entry_.path) ||
        !resolve(link_target_, Field::LinkTarget, Field::LinkTargetHex, "link_target", true,
                 entry_.link_target) ||
        !resolve(base_link_, Field::BaseLink, Field::BaseLinkHex, "base_link", false,
                 entry_.base_link) ||
        !resolve(redacted_link_, Field::RedactedLink, Field::RedactedLinkHex, "redacted_link",
                 false, entry_.redacted_link)) {
      return false;
    }
    if (std::string why = entry_problem(entry_); !why.empty()) return stop(std::move(why));
    // pulsebox writes its entries from a map: in path order, each path once.
    // Any other order was not written by pulsebox, and a reader that streams
    // them (a diff printed as it is made) must see the order a commit applies.
    // (No entry has an empty path: entry_problem refuses it.)
    if (!last_path_.empty() && !(last_path_ < entry_.path)) {
      return stop("its entries are not in path order (" + core::quote_name(entry_.path) +
                  " after " + core::quote_name(last_path_) + ")");
    }
    last_path_ = entry_.path;
    each_(std::move(entry_));
    return true;
  }

  std::string key_;
  const std::function<void(Entry&&)>& each_;
  json document_;
  std::vector<json*> stack_;  // the open containers of the document
  std::string pending_key_;
  bool in_stream_ = false;  // inside the array `key_`
  bool key_seen_ = false;   // the top-level object's `key_`, once
  int depth_ = 0;
  int skip_ = 0;  // > 0: inside a value of an entry that is not read
  // 0: not in an entry; 1: in an entry object; 2: in its snapshot.
  int entry_level_ = 0;
  Field field_ = Field::Unknown;
  std::string field_name_;
  Entry entry_;
  std::uint64_t seen_ = 0, snapshot_seen_ = 0;
  bool has_snapshot_ = false;
  NameField path_, link_target_, base_link_, redacted_link_;
  std::string last_path_;  // the last entry's; empty before the first
  std::string problem_;
};

}  // namespace

core::Result<std::optional<EntryStream>> stream_entries(int fd, std::uint64_t max_bytes,
                                                        const std::string& source,
                                                        std::string_view key,
                                                        const std::function<void(Entry&&)>& each) {
  EntryHandler handler(key, each);
  PB_TRY(parsed, core::sax_parse_fd(fd, max_bytes, source, handler));
  if (!parsed && !handler.stopped_by_entry()) return std::optional<EntryStream>();
  return std::optional<EntryStream>(handler.take());
}

}  // namespace pulsebox::workspace
