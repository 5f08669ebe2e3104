/* UTF-8 as Python's strict decoder takes it: whether a header key decodes to str without
 * replacement characters (the decoder's concern) and where a renderer may copy bytes into a JSON
 * string as they are (views/json_text.h, cli/render_v2_dump.c). */

#ifndef KFS_UTF8_H
#define KFS_UTF8_H

#include "../native.h"

/* The length of the valid UTF-8 sequence at s[0] (a byte >= 0x80) within n bytes, or 0 if it is not
 * one to Python's strict decoder: no continuation byte first, no overlong forms, no surrogates
 * (U+D800-DFFF), nothing above U+10FFFF. */
static inline Py_ssize_t
utf8_sequence(const uint8_t *s, Py_ssize_t n)
{
    uint8_t c = s[0];
#define CONT(i) (n > (i) && (s[i] & 0xC0) == 0x80)
    if (c < 0xC2) /* a continuation byte, or the lead of an overlong 2-byte form */
        return 0;
    if (c < 0xE0)
        return CONT(1) ? 2 : 0;
    if (c < 0xF0) {
        if (!CONT(1) || !CONT(2))
            return 0;
        if (c == 0xE0 && s[1] < 0xA0) /* overlong */
            return 0;
        if (c == 0xED && s[1] >= 0xA0) /* surrogate */
            return 0;
        return 3;
    }
    if (c < 0xF5) {
        if (!CONT(1) || !CONT(2) || !CONT(3))
            return 0;
        if (c == 0xF0 && s[1] < 0x90) /* overlong */
            return 0;
        if (c == 0xF4 && s[1] >= 0x90) /* above U+10FFFF */
            return 0;
        return 4;
    }
    return 0;
#undef CONT
}

/* Whether n bytes are valid UTF-8 (a header key the decoder turns into str without replacement). */
static inline int
valid_utf8(const uint8_t *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n;) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        Py_ssize_t k = utf8_sequence(s + i, n - i);
        if (k == 0)
            return 0;
        i += k;
    }
    return 1;
}

#endif /* KFS_UTF8_H */
