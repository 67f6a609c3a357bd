/*
 * frames.h — the wire format of the data plane (data_plane.h).
 *
 * After the shared-secret handshake of common/auth.h, both directions of a
 * data connection carry frames, all little-endian:
 *
 *   u8 type | u64 channel id | u32 value | u32 payload length | payload
 *
 *   type      value                 payload
 *   PEER      sender's listen port  none      first frame after the handshake
 *   REQUEST   initial credit        u32 consumer buffer size
 *   CREDIT    credits added (> 0)   none
 *   BUFFER    sender's backlog      the buffer's bytes (elements of channel.h)
 *   PRIORITY  sender's backlog      one event sent ahead of the queue, no credit
 *   ERROR     0                     a message (not NUL-terminated)
 *   CLOSE     0                     none      consumer released the channel
 *
 * Payloads are capped at SL_FRAME_MAX_PAYLOAD (a connection multiplexes
 * channels of different buffer sizes, and one oversized record legally
 * grows a buffer beyond its channel's size, see sl_channel_acquire; the
 * receiver also checks a BUFFER against the credit it gave).  The decoder
 * is pure (no allocation, no state) so that it can be fuzzed.
 */
#ifndef SL_NET_FRAMES_H
#define SL_NET_FRAMES_H

#include <stddef.h>
#include <stdint.h>

enum {
    SL_FRAME_PEER = 1,
    SL_FRAME_REQUEST = 2,
    SL_FRAME_CREDIT = 3,
    SL_FRAME_BUFFER = 4,
    SL_FRAME_PRIORITY = 5,
    SL_FRAME_ERROR = 6,
    SL_FRAME_CLOSE = 7,
};
#define SL_FRAME_HEADER 17
#define SL_FRAME_MAX_PAYLOAD (16u << 20)
#define SL_FRAME_MAX_ERROR 4096u

typedef struct sl_frame {
    uint8_t type;
    uint64_t id;
    uint32_t value;
    uint32_t len;
    const uint8_t *payload; /* points into the parsed bytes */
} sl_frame_t;

/* Name of a frame type ("BUFFER"), "?" for an unknown one. */
const char *sl_frame_type_name(int type);
/* Writes the 17-byte header of a frame to out. */
void sl_frame_header(uint8_t out[SL_FRAME_HEADER], int type, uint64_t id, uint32_t value, uint32_t len);
/* Decodes one frame from p[0..len): returns the bytes it takes (> 0) and
 * fills f, 0 when more bytes are needed, or SL_EFORMAT with a message in
 * err naming what is wrong (unknown type, payload over max_payload, a
 * payload length wrong for its type, a zero credit).  Any thread; pure. */
long sl_frame_parse(const uint8_t *p, size_t len, uint32_t max_payload, sl_frame_t *f, char *err,
                    size_t errlen);
/* Decodes and checks only the header of the frame at p[0..len) (the same
 * checks as sl_frame_parse): SL_FRAME_HEADER with f filled (f->payload
 * NULL, f->len the payload length still to come), 0 when fewer than
 * SL_FRAME_HEADER bytes are there, or SL_EFORMAT.  The receiver uses it
 * to read a BUFFER's payload straight into a channel buffer.  Any thread; pure. */
long sl_frame_parse_header(const uint8_t *p, size_t len, uint32_t max_payload, sl_frame_t *f, char *err,
                           size_t errlen);

#endif
