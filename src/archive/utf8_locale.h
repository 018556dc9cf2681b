// libarchive converts names between pax's UTF-8 and the locale's charset:
// in the C locale every non-ASCII name fails, and the bytes written would
// depend on the process's locale. A UTF-8 locale for the calling thread,
// while an archive is read or written, makes that conversion a check and
// the stream the same everywhere. Names libarchive cannot convert (not
// UTF-8) are written as bytes with "hdrcharset=BINARY"; names read from
// such headers, and from ustar and GNU headers, are taken as bytes.
#pragma once

#include <locale.h>

namespace pulsebox::archive {

class Utf8ThreadLocale {
 public:
  Utf8ThreadLocale() : locale_(::newlocale(LC_CTYPE_MASK, "C.UTF-8", nullptr)) {
    if (locale_ != nullptr) previous_ = ::uselocale(locale_);
  }
  ~Utf8ThreadLocale() {
    if (locale_ == nullptr) return;
    ::uselocale(previous_);
    ::freelocale(locale_);
  }
  Utf8ThreadLocale(const Utf8ThreadLocale&) = delete;
  Utf8ThreadLocale& operator=(const Utf8ThreadLocale&) = delete;

 private:
  locale_t locale_;
  locale_t previous_ = nullptr;
};

}  // namespace pulsebox::archive
