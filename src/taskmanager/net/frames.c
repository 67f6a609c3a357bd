/* frames.c — encoding and the pure decoder of data plane frames (frames.h). */
#include "taskmanager/net/frames.h"

#include <inttypes.h>

#include "common/common.h"

const char *sl_frame_type_name(int type) {
    switch (type) {
    case SL_FRAME_PEER: return "PEER";
    case SL_FRAME_REQUEST: return "REQUEST";
    case SL_FRAME_CREDIT: return "CREDIT";
    case SL_FRAME_BUFFER: return "BUFFER";
    case SL_FRAME_PRIORITY: return "PRIORITY";
    case SL_FRAME_ERROR: return "ERROR";
    case SL_FRAME_CLOSE: return "CLOSE";
    default: return "?";
    }
}

void sl_frame_header(uint8_t out[SL_FRAME_HEADER], int type, uint64_t id, uint32_t value, uint32_t len) {
    out[0] = (uint8_t)type;
    sl_st64(out + 1, id);
    sl_st32(out + 9, value);
    sl_st32(out + 13, len);
}

long sl_frame_parse(const uint8_t *p, size_t len, uint32_t max_payload, sl_frame_t *f, char *err,
                    size_t errlen) {
    sl_frame_t h;
    long n = sl_frame_parse_header(p, len, max_payload, &h, err, errlen);
    if (n <= 0) return n;
    if (len - SL_FRAME_HEADER < h.len) return 0;
    h.payload = p + SL_FRAME_HEADER;
    *f = h;
    return (long)SL_FRAME_HEADER + (long)h.len;
}

long sl_frame_parse_header(const uint8_t *p, size_t len, uint32_t max_payload, sl_frame_t *f, char *err,
                           size_t errlen) {
    if (len < 1) return 0;
    int type = p[0];
    if (type < SL_FRAME_PEER || type > SL_FRAME_CLOSE)
        return sl_errf(err, errlen, SL_EFORMAT, "bad frame: unknown type %d", type);
    if (len < SL_FRAME_HEADER) return 0;
    uint64_t id = sl_ld64(p + 1);
    uint32_t value = sl_ld32(p + 9), plen = sl_ld32(p + 13);
    const char *name = sl_frame_type_name(type);
    uint32_t cap = max_payload < SL_FRAME_MAX_PAYLOAD ? max_payload : SL_FRAME_MAX_PAYLOAD;
    switch (type) {
    case SL_FRAME_PEER:
    case SL_FRAME_CREDIT:
    case SL_FRAME_CLOSE:
        if (plen != 0)
            return sl_errf(err, errlen, SL_EFORMAT, "bad frame: %s of channel %016" PRIx64 " with a %u-byte payload",
                           name, id, plen);
        if (type == SL_FRAME_CREDIT && value == 0)
            return sl_errf(err, errlen, SL_EFORMAT, "bad frame: CREDIT of 0 for channel %016" PRIx64, id);
        if (type == SL_FRAME_PEER && (value == 0 || value > 65535))
            return sl_errf(err, errlen, SL_EFORMAT, "bad frame: PEER announces port %u", value);
        break;
    case SL_FRAME_REQUEST:
        if (plen != 4)
            return sl_errf(err, errlen, SL_EFORMAT,
                           "bad frame: REQUEST of channel %016" PRIx64 " with a %u-byte payload (want 4)", id, plen);
        break;
    case SL_FRAME_ERROR:
        if (plen > SL_FRAME_MAX_ERROR)
            return sl_errf(err, errlen, SL_EFORMAT, "bad frame: ERROR of %u bytes (at most %u)", plen,
                           SL_FRAME_MAX_ERROR);
        break;
    default: /* BUFFER, PRIORITY */
        if (plen > cap)
            return sl_errf(err, errlen, SL_EFORMAT,
                           "bad frame: %s of channel %016" PRIx64 " has %u bytes, more than the cap of %u", name, id,
                           plen, cap);
        break;
    }
    f->type = (uint8_t)type;
    f->id = id;
    f->value = value;
    f->len = plen;
    f->payload = NULL;
    return SL_FRAME_HEADER;
}
