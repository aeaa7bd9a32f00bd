#ifndef CAIRN_CCURL_SHIM_H
#define CAIRN_CCURL_SHIM_H
#include <curl/curl.h>

// curl_easy_setopt and curl_easy_getinfo are variadic: one typed wrapper per argument kind.
static inline CURLcode cairn_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode cairn_curl_setopt_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode cairn_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode cairn_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode cairn_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}
typedef size_t (*cairn_curl_data_callback)(char *data, size_t size, size_t count, void *context);
static inline CURLcode cairn_curl_setopt_data_callback(CURL *handle, CURLoption option, cairn_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}
typedef int (*cairn_curl_progress_callback)(void *context, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);
static inline CURLcode cairn_curl_setopt_progress_callback(CURL *handle, cairn_curl_progress_callback value) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, value);
}
static inline CURLcode cairn_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode cairn_curl_getinfo_offset(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode cairn_curl_getinfo_double(CURL *handle, CURLINFO info, double *value) {
    return curl_easy_getinfo(handle, info, value);
}
// CURLAUTH_BASIC is a cast expression Swift does not import.
static inline long cairn_curl_auth_basic(void) { return (long)CURLAUTH_BASIC; }
#endif
