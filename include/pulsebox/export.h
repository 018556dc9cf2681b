// Symbol visibility for libpulsebox.
//
// The library is built with -fvisibility=hidden; only declarations marked
// PULSEBOX_API are part of the shared library's ABI. Exception classes must be
// exported too, or a catch in the caller would not see the library's typeinfo.
#pragma once

#define PULSEBOX_API __attribute__((visibility("default")))
