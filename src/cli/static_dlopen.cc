// The static CLI never loads shared objects: OpenSSL's DSO support references
// dlopen, and glibc's static dlopen would load a second libc from the host's
// files (only safe with the exact glibc version the binary was linked with).
// The link sends their calls here (-Wl,--wrap=dlopen,--wrap=dlerror in
// meson.build): such a load fails cleanly, as if the file were missing.
extern "C" {

void* __wrap_dlopen(const char* /*file*/, int /*mode*/) {
  return nullptr;
}

char* __wrap_dlerror() {
  static char message[] = "the static pulsebox executable cannot load shared objects";
  return message;
}

}  // extern "C"
