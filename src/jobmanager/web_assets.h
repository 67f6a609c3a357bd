/*
 * web_assets.h — the web UI's files (web/), embedded into the binary at
 * build time: scripts/embed_web.cmake turns each file into a byte array
 * in ${CMAKE_BINARY_DIR}/gen/web/web_assets.c, with its Content-Type and
 * an ETag (a hash of its bytes).  rest.c serves them at / and /web/<name>
 * by looking the name up in this table, so no file the client names is
 * ever opened.  Read-only data: any thread.
 */
#ifndef SL_JOBMANAGER_WEB_ASSETS_H
#define SL_JOBMANAGER_WEB_ASSETS_H

#include <stddef.h>

typedef struct sl_web_asset {
    const char *name;          /* "index.html", "app.js": the file's name in web/ */
    const char *content_type;  /* "text/html; charset=utf-8" ... */
    const char *etag;          /* "\"<16 hex>\"" */
    const unsigned char *data;
    size_t len;
} sl_web_asset_t;

extern const sl_web_asset_t sl_web_assets[];
extern const int sl_web_nassets;

#endif
