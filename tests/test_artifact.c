/*
 * test_artifact.c — the artifact download's frames (protocol/artifact.h):
 * request and answer round trips, and both decoders fed truncated,
 * mutated and random frames: each is decoded or refused with a message,
 * never read out of bounds (the ASan build runs this too), and an answer
 * whose bytes changed is refused by its digest.
 */
#include <stdlib.h>

#include "protocol/artifact.h"
#include "test.h"

TEST(round_trips) {
    sl_buf_t b = {0};
    sl_artifact_request_encode("job-1", &b);
    char id[64], err[512];
    CHECK_EQ(sl_artifact_request_decode(b.p, b.len, id, sizeof id, err, sizeof err), 0);
    CHECK_STR(id, "job-1");
    b.len = 0;
    sl_artifact_request_encode("../etc", &b); /* a path is never a job id */
    CHECK_EQ(sl_artifact_request_decode(b.p, b.len, id, sizeof id, err, sizeof err), SL_EFORMAT);
    uint8_t art[5000];
    for (size_t i = 0; i < sizeof art; i++) art[i] = (uint8_t)(i * 31 + 7);
    b.len = 0;
    sl_artifact_answer_encode(art, sizeof art, NULL, &b);
    const uint8_t *p;
    size_t n;
    CHECK_EQ(sl_artifact_answer_decode(b.p, b.len, &p, &n, err, sizeof err), 0);
    CHECK(n == sizeof art && memcmp(p, art, n) == 0);
    b.p[b.len - 100] ^= 1; /* a byte changed in transit */
    CHECK_EQ(sl_artifact_answer_decode(b.p, b.len, &p, &n, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, "SHA-256");
    b.len = 0;
    sl_artifact_answer_encode(NULL, 0, "no job 'x' with an artifact here", &b);
    CHECK_EQ(sl_artifact_answer_decode(b.p, b.len, &p, &n, err, sizeof err), SL_ENOTFOUND);
    CHECK_CONTAINS(err, "refused: no job 'x'");
    sl_buf_free(&b);
}

TEST(decoders_survive_damaged_frames) {
    srand(5);
    sl_buf_t req = {0}, ans = {0};
    sl_artifact_request_encode("a-job-id", &req);
    uint8_t art[300];
    for (size_t i = 0; i < sizeof art; i++) art[i] = (uint8_t)rand();
    sl_artifact_answer_encode(art, sizeof art, NULL, &ans);
    int ok = 0, refused = 0;
    for (int round = 0; round < 20000; round++) {
        const sl_buf_t *src = round % 2 ? &ans : &req;
        size_t n = (size_t)rand() % (src->len + 8);
        uint8_t *f = malloc(n ? n : 1); /* exactly n bytes: ASan sees any overread */
        for (size_t i = 0; i < n; i++) f[i] = i < src->len ? src->p[i] : (uint8_t)rand();
        int flips = rand() % 4;
        for (int k = 0; k < flips && n; k++) f[rand() % n] ^= (uint8_t)(1u << (rand() % 8));
        char id[64], err[512] = "";
        const uint8_t *p;
        size_t len;
        int rc = round % 2 ? sl_artifact_answer_decode(f, n, &p, &len, err, sizeof err)
                           : sl_artifact_request_decode(f, n, id, sizeof id, err, sizeof err);
        if (rc == 0) {
            ok++;
            if (round % 2) CHECK(p >= f && p + len <= f + n);
        } else {
            refused++;
            CHECK(err[0] != 0);
        }
        free(f);
    }
    fprintf(stderr, "  %d frames decoded, %d refused with a message\n", ok, refused);
    CHECK(ok > 0 && refused > 0);
    sl_buf_free(&req);
    sl_buf_free(&ans);
}

int main(void) {
    RUN(round_trips);
    RUN(decoders_survive_damaged_frames);
    TEST_MAIN_END();
}
