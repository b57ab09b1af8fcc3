/*
 * Native kernels of the iostat text importer (iogauge/importers/iostat/).
 *
 * Each function is the exact equivalent of a numpy routine of that module, which stays the
 * reference (and the fallback when this library is not built): tests run both on the same
 * input and require identical results. They are plain C over caller-owned buffers (no Python
 * API), called through ctypes, which releases the GIL for the duration of the call.
 *
 * Built by scripts/build_accel.py (make install) with -DIG_SOURCE_SHA256="<sha256 of this
 * file>"; iogauge/importers/iostat/native.py loads the library only when that stamp matches the
 * installed source, so an edited kernel never runs stale.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* x86-64: SSE2 always, SSSE3/SSE4.1 checked at run time (ig_decode_fixed) */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define IG_SSE 1
#else
#define IG_SSE 0
#endif

#ifndef IG_SOURCE_SHA256
#define IG_SOURCE_SHA256 "unstamped"
#endif

/* Line kinds: the values of iostat/lines.py's ROW, BLANK ... constants. */
enum {
    K_BLANK = 0,
    K_DEVH = 5,
    K_CPUH = 3,
    K_ROW = 6,
    K_BANNER_CAND = 7, /* starts with "Linux ": a banner if its regular expression matches */
    K_TS_CAND = 8,     /* starts with a digit: a time stamp if its patterns match */
    K_WS_CAND = 9,     /* starts with a space or tab and may be all white space */
};

const char *ig_source_sha256(void) { return IG_SOURCE_SHA256; }

/* One line of ig_lines: from s to the newline at e (a '\r' before it is not part of it). */
#define IG_LINE(e)                                                                          \
    do {                                                                                    \
        if (k >= cap)                                                                       \
            return -1;                                                                      \
        starts[k] = s;                                                                      \
        ends[k] = ((e) > s && buf[(e) - 1] == '\r') ? (e) - 1 : (e);                        \
        k++;                                                                                \
        s = (e) + 1;                                                                        \
    } while (0)

/*
 * Lines of buf[0:n] (lines.Lines): a line ends before its '\n', one '\r' before that
 * is not part of it, and a last line without a newline is a line (also without a final '\r').
 * starts/ends have room for cap entries (ig_count(buf, n, '\n') + 1 are needed). Returns the
 * number of lines, or -1 if there are more than cap. Newlines are found 16 bytes at a time
 * (SSE2) on x86-64.
 */
int64_t ig_lines(const uint8_t *buf, int64_t n, int64_t *starts, int64_t *ends, int64_t cap)
{
    int64_t k = 0, s = 0, i = 0;
#if IG_SSE
    const __m128i nl = _mm_set1_epi8('\n');
    for (; i + 16 <= n; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(buf + i));
        uint32_t m = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, nl));
        while (m) {
            int64_t e = i + __builtin_ctz(m);
            m &= m - 1;
            IG_LINE(e);
        }
    }
#endif
    for (; i < n; i++)
        if (buf[i] == '\n')
            IG_LINE(i);
    if (s < n)
        IG_LINE(n);
    return k;
}

/* Number of bytes equal to c in buf[0:n]. */
int64_t ig_count(const uint8_t *buf, int64_t n, int32_t c)
{
    int64_t count = 0, i = 0;
#if IG_SSE
    /* matches counted per byte lane (a match is -1: subtracted), summed every 255 blocks
       (psadbw), so no per-block popcount */
    const __m128i cc = _mm_set1_epi8((char)c), zero = _mm_setzero_si128();
    while (i + 16 <= n) {
        __m128i acc = zero;
        int64_t stop = i + 16 * 255;
        if (stop > n - 15)
            stop = n - 15;
        for (; i < stop; i += 16)
            acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(buf + i)), cc));
        __m128i sums = _mm_sad_epu8(acc, zero);
        count += _mm_cvtsi128_si64(sums) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums));
    }
#endif
    for (; i < n; i++)
        count += buf[i] == (uint8_t)c;
    return count;
}

/*
 * The lines idx[0..m) of buf (bounds starts/ends) copied one after another into out, each
 * followed by '\n' (out needs sum of lengths + m bytes). Returns the bytes written.
 */
int64_t ig_gather_lines(const uint8_t *buf, const int64_t *starts, const int64_t *ends,
                        const int64_t *idx, int64_t m, uint8_t *out)
{
    int64_t o = 0;
    for (int64_t i = 0; i < m; i++) {
        int64_t s = starts[idx[i]], len = ends[idx[i]] - s;
        memcpy(out + o, buf + s, (size_t)len);
        o += len;
        out[o++] = '\n';
    }
    return o;
}

static int ws_end(uint8_t c) { return c == 9 || c == 10 || c == 11 || c == 12 || c == 13 || c == 32 || c >= 0x80; }

static int has_prefix(const uint8_t *line, int64_t len, const char *p, int64_t plen)
{
    return len >= plen && memcmp(line, p, (size_t)plen) == 0;
}

/*
 * First pass of lines.classify: the tests that need no regular expression. A line is
 * K_BLANK (empty), K_DEVH ("Device" first or " Device" last), K_CPUH ("avg-cpu" first), a
 * candidate left to the caller's patterns (K_WS_CAND, K_TS_CAND, K_BANNER_CAND) or K_ROW.
 * Only lines whose first byte is one of "LaD \t0123456789" are tested, with the same
 * priority as the reference: banner > avg-cpu > Device > stamp > blank > device line.
 */
void ig_classify(const uint8_t *buf, const int64_t *starts, const int64_t *ends, int64_t n,
                 uint8_t *kind)
{
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *line = buf + starts[i];
        int64_t len = ends[i] - starts[i];
        if (len == 0) {
            kind[i] = K_BLANK;
            continue;
        }
        uint8_t f = line[0];
        int digit = (uint8_t)(f - '0') < 10;
        if (!(digit || f == 'L' || f == 'a' || f == 'D' || f == ' ' || f == '\t')) {
            kind[i] = K_ROW;
            continue;
        }
        uint8_t k = K_ROW;
        if ((f == ' ' || f == '\t') && ws_end(line[len - 1]))
            k = K_WS_CAND;
        if (digit)
            k = K_TS_CAND;
        if (len >= 7 && memcmp(line + len - 7, " Device", 7) == 0)
            k = K_DEVH;
        if (f == 'D' && has_prefix(line, len, "Device", 6))
            k = K_DEVH;
        if (f == 'a' && has_prefix(line, len, "avg-cpu", 7))
            k = K_CPUH;
        if (f == 'L' && has_prefix(line, len, "Linux ", 6))
            k = K_BANNER_CAND;
        kind[i] = k;
    }
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define IG_LITTLE_ENDIAN 1
#else
#define IG_LITTLE_ENDIAN 0 /* group8 reads bytes as a little-endian word */
#endif

static const uint64_t pow10_u64[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
                                      100000000};

#define BYTES(c) (0x0101010101010101ULL * (uint64_t)(c))

/* 0x80 in each byte of z that is not zero, 0 elsewhere (exact: no carry between bytes). */
static inline uint64_t nonzero_bytes(uint64_t z)
{
    return (((z & BYTES(0x7F)) + BYTES(0x7F)) | z) & BYTES(0x80);
}

/*
 * The n (1..8) places just before `end`, read at once as a little-endian word (its top byte
 * is the place before `end`; `keep` has 0xFF in its top n bytes: the 8 - n bytes below the
 * range are read as spaces). Returns 1 (bad) unless they are spaces then digits, the last
 * place a digit (or, with all_digits, every place a digit); *value is the digits as an
 * integer. The bytes before the range are part of the same line (callers ensure end - 8 is
 * not before the line's start).
 */
static inline unsigned group8(const uint8_t *end, uint64_t keep, int all_digits,
                              uint64_t *value)
{
    uint64_t x;
    memcpy(&x, end - 8, 8);
    x = (x & keep) | (BYTES(' ') & ~keep);
    uint64_t notsp = nonzero_bytes(x ^ BYTES(' '));
    uint64_t notdig = nonzero_bytes((x & BYTES(0xF0)) ^ BYTES(0x30))
                      | (((x & BYTES(0x0F)) + BYTES(0x06)) & BYTES(0x10)) << 3;
    uint64_t sp = ~notsp & BYTES(0x80), dig = ~notdig & BYTES(0x80);
    unsigned bad = (notsp & notdig) != 0; /* neither a space nor a digit */
    bad |= !(dig >> 63);                  /* the last place is not a digit */
    uint64_t lowest = dig & (0 - dig);    /* the first digit (flag bit) */
    bad |= (sp & ~(lowest - 1)) != 0;     /* a space after a digit */
    if (all_digits)
        bad |= (sp & keep) != 0;
    /* spaces are 0x20: their low nibble is 0, so they read as leading zeros */
    uint64_t v = x & BYTES(0x0F);
    v = v * 10 + (v >> 8); /* pairs: 10 * high + low in every other byte */
    v = (((v & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32)))
         + (((v >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >> 32;
    *value = v;
    return bad;
}

/* One range of ig_decode_fixed place by place (any width): returns 1 if it is read. */
static int decode_general(const uint8_t *line, int32_t a, int32_t b, int32_t d, uint64_t *value)
{
    int32_t places = (b - a) - (d < b ? 1 : 0);
    int32_t first_read = places - 16; /* digit places before this one must be 0 */
    int32_t t = 0;                    /* digit place index */
    uint64_t v = 0;
    int seen = 0; /* a non-space byte was met in this range */
    for (int32_t c = a; c < b; c++) {
        uint8_t ch = line[c];
        if (c == d) {
            if (ch != '.')
                return 0;
            seen = 1;
            continue;
        }
        if (ch == ' ') {
            if (seen || c == d - 1 || c > d)
                return 0; /* a space after a digit, or where a digit must be */
        } else {
            uint8_t dg = (uint8_t)(ch - '0');
            if (dg >= 10)
                return 0;
            seen = 1;
            if (t < first_read) {
                if (dg)
                    return 0;
            } else {
                v = v * 10 + dg;
            }
        }
        t++;
    }
    *value = v;
    return 1;
}

/* How one range is read: the same rule three ways (see ig_decode_fixed). */
enum { BY_GENERAL = 0, BY_WORDS = 1, BY_VECTOR = 2 };

typedef struct {
    int32_t a, b, d, method;
    uint64_t keep_w, keep_f, mul; /* BY_WORDS: group8 masks, 10 ** decimals */
    uint32_t places, must;        /* BY_VECTOR: bit masks over the 16 bytes before b */
    uint8_t shuffle[16];          /* BY_VECTOR: digit places right-aligned, dot dropped */
} field_plan;

#if IG_SSE
/*
 * One range by SSE4.1 (the 16 bytes ending at the range's end): bit i of a mask is byte
 * b - 16 + i. plan->places: the range's bytes but the dot; plan->must: places that must be
 * digits (the one before the dot, the decimals). Returns 1 (bad) unless the rule of
 * ig_decode_fixed holds; *value is the digits as an integer (up to 16 of them).
 */
__attribute__((target("ssse3,sse4.1"))) static inline unsigned
vector16(const uint8_t *line, const field_plan *plan, uint64_t *value)
{
    __m128i x = _mm_loadu_si128((const __m128i *)(line + plan->b - 16));
    __m128i sp = _mm_cmpeq_epi8(x, _mm_set1_epi8(' '));
    __m128i dd = _mm_sub_epi8(x, _mm_set1_epi8('0'));
    __m128i dg = _mm_cmpeq_epi8(_mm_min_epu8(dd, _mm_set1_epi8(9)), dd);
    uint32_t spm = (uint32_t)_mm_movemask_epi8(sp) & plan->places;
    uint32_t dgm = (uint32_t)_mm_movemask_epi8(dg) & plan->places;
    unsigned bad = (spm | dgm) != plan->places; /* neither a space nor a digit */
    bad |= (dgm & plan->must) != plan->must;    /* a missing digit */
    uint32_t lowest = dgm & (0u - dgm);
    bad |= (spm & ~(lowest - 1)) != 0; /* a space after a digit */
    if (plan->d < plan->b)
        bad |= line[plan->d] != '.';
    /* digits right-aligned, the dot and the bytes before the range dropped (shuffle 0x80:
       zero); a space's low nibble is 0, so spaces read as leading zeros */
    __m128i v = _mm_shuffle_epi8(_mm_and_si128(x, _mm_set1_epi8(0x0F)),
                                 _mm_loadu_si128((const __m128i *)plan->shuffle));
    v = _mm_maddubs_epi16(v, _mm_set1_epi16(0x010A));  /* 10 * first + second */
    v = _mm_madd_epi16(v, _mm_set1_epi32(0x00010064)); /* 100 * pair + pair */
    v = _mm_packus_epi32(v, v);
    v = _mm_madd_epi16(v, _mm_set1_epi32(0x00012710)); /* 10000 * quad + quad */
    uint64_t hi = (uint32_t)_mm_cvtsi128_si32(v);
    uint64_t lo = (uint32_t)_mm_extract_epi32(v, 1);
    *value = hi * 100000000ULL + lo;
    return bad;
}

static int have_sse41(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("sse4.1");
}
#endif

static void plan_field(field_plan *plan, int32_t a, int32_t b, int32_t d, int vector_ok)
{
    memset(plan, 0, sizeof *plan);
    plan->a = a;
    plan->b = b;
    plan->d = d;
    int32_t whole = d - a, decimals = d < b ? b - d - 1 : 0;
    plan->method = BY_GENERAL;
    if (vector_ok && b - a <= 16 && b >= 16) {
        plan->method = BY_VECTOR;
        int32_t lo = 16 - (b - a), dot = d < b ? d - (b - 16) : 16;
        for (int32_t i = lo; i < 16; i++)
            if (i != dot)
                plan->places |= 1u << i;
        plan->must = (1u << (dot - 1)) | (plan->places & ~((2u << dot) - 1) & 0xFFFFu);
        for (int32_t i = 0; i < 16; i++) {
            int32_t src = i > dot ? i : i - 1; /* places before the dot move up one byte */
            if (dot == 16)
                src = i;
            plan->shuffle[i] = (uint8_t)(src >= lo ? src : 0x80);
        }
    } else if (IG_LITTLE_ENDIAN && whole <= 8 && decimals <= 8 && d >= 8 && b >= 8) {
        plan->method = BY_WORDS;
        plan->keep_w = whole >= 8 ? ~0ULL : ~((1ULL << (8 * (8 - whole))) - 1);
        plan->keep_f = decimals >= 8 ? ~0ULL : ~((1ULL << (8 * (8 - decimals))) - 1);
        plan->mul = pow10_u64[decimals];
    }
}

#define IG_DECODE_ONE_BODY                                                                  \
    const uint64_t limit = (uint64_t)1 << 53;                                               \
    uint64_t v = 0;                                                                         \
    unsigned bad;                                                                           \
    if (plan->method == BY_WORDS) {                                                         \
        uint64_t w = 0, f = 0;                                                              \
        bad = group8(line + plan->d, plan->keep_w, 0, &w);                                  \
        if (plan->d < plan->b) {                                                            \
            bad |= line[plan->d] != '.';                                                    \
            if (plan->b - plan->d - 1)                                                      \
                bad |= group8(line + plan->b, plan->keep_f, 1, &f);                         \
        }                                                                                   \
        v = w * plan->mul + f;                                                              \
    } else {                                                                                \
        bad = !decode_general(line, plan->a, plan->b, plan->d, &v);                         \
    }                                                                                       \
    *value = v;                                                                             \
    return bad | (v >= limit);

/* One range by words or place by place. */
static inline unsigned decode_scalar(const uint8_t *line, const field_plan *plan,
                                     uint64_t *value)
{
    IG_DECODE_ONE_BODY
}

/* The row loop of ig_decode_fixed (see there), for one way of reading ranges. */
#define IG_DECODE_ROWS(DECODE)                                                              \
    for (int64_t r = 0; r < k; r++) {                                                       \
        const uint8_t *line = buf + rows[r];                                                \
        unsigned bad = 0;                                                                   \
        for (int32_t j = 0; j < nf; j++) {                                                  \
            uint64_t v;                                                                     \
            bad |= DECODE(line, &plans[j], &v);                                             \
            out[(int64_t)j * k + r] = (double)v / scale[j];                                 \
        }                                                                                   \
        ok[r] = (uint8_t)!bad;                                                              \
    }

static void decode_rows_scalar(const uint8_t *buf, const int64_t *rows, int64_t k, int32_t nf,
                               const field_plan *plans, const double *scale, double *out,
                               uint8_t *ok)
{
    IG_DECODE_ROWS(decode_scalar)
}

#if IG_SSE
/* Ranges by vector16 when planned so, else as decode_scalar (all inlined for SSE4.1). */
__attribute__((target("ssse3,sse4.1"))) static inline unsigned
decode_any(const uint8_t *line, const field_plan *plan, uint64_t *value)
{
    if (plan->method == BY_VECTOR) {
        const uint64_t limit = (uint64_t)1 << 53;
        unsigned bad = vector16(line, plan, value);
        return bad | (*value >= limit);
    }
    IG_DECODE_ONE_BODY
}

__attribute__((target("ssse3,sse4.1"))) static void
decode_rows_vector(const uint8_t *buf, const int64_t *rows, int64_t k, int32_t nf,
                   const field_plan *plans, const double *scale, double *out, uint8_t *ok)
{
    IG_DECODE_ROWS(decode_any)
}
#endif

/*
 * fixed.decode_fixed over the lines starting at rows[0..k): numbers at the byte
 * ranges [fa[j], fb[j]) of each line, with the dot at fd[j] (fd[j] == fb[j]: no dot), as
 * strtod reads them. A range must be spaces, then digits, then the dot and digits; the digit
 * before the dot and every decimal must be present. The digits are one integer, divided by
 * scale[j] (10 ** decimals) in one correctly rounded division. Only the last 16 digit
 * places are read; a range with a non-zero digit before them, or a value of 2**53 or more,
 * is refused (its digits may not fit a double exactly). out[j * k + r] is field j of line
 * r; ok[r] is 1 when every field of line r was read.
 *
 * The rule is applied three ways, chosen per range: 16 bytes at once with SSE4.1 (x86-64
 * CPUs that have it, ranges of at most 16 bytes: all that sysstat prints), the places
 * before and after the dot as two 8-byte words (group8), or place by place
 * (decode_general). vector_ok = 0 forbids the first (tests compare the three).
 */
void ig_decode_fixed(const uint8_t *buf, const int64_t *rows, int64_t k, int32_t nf,
                     const int32_t *fa, const int32_t *fb, const int32_t *fd,
                     const double *scale, double *out, uint8_t *ok, int32_t vector_ok)
{
    field_plan stack_plans[32];
    field_plan *plans = nf <= 32 ? stack_plans : malloc((size_t)nf * sizeof(field_plan));
    if (!plans) { /* no memory for the plans: nothing is read (the caller's slow path) */
        memset(ok, 0, (size_t)k);
        return;
    }
#if IG_SSE
    vector_ok = vector_ok && have_sse41();
#else
    vector_ok = 0;
#endif
    for (int32_t j = 0; j < nf; j++)
        plan_field(&plans[j], fa[j], fb[j], fd[j], vector_ok);
#if IG_SSE
    if (vector_ok)
        decode_rows_vector(buf, rows, k, nf, plans, scale, out, ok);
    else
#endif
        decode_rows_scalar(buf, rows, k, nf, plans, scale, out, ok);
    if (plans != stack_plans)
        free(plans);
}

/*
 * Groups of equal items by open addressing: a hash finds the candidates, `same` decides
 * (so a hash collision never merges two groups). first[g] is the item that opened group g.
 */
typedef struct {
    int64_t *slots;   /* group + 1; 0 = empty */
    uint64_t *hashes; /* of each group */
    int64_t *first;
    int64_t size, groups, max_groups;
} group_table;

static int table_open(group_table *t, int64_t max_groups, int64_t *first)
{
    t->size = 64;
    while (t->size < 2 * max_groups)
        t->size <<= 1;
    t->slots = calloc((size_t)t->size, sizeof(int64_t));
    t->hashes = malloc((size_t)(max_groups > 0 ? max_groups : 1) * sizeof(uint64_t));
    t->first = first;
    t->groups = 0;
    t->max_groups = max_groups;
    if (!t->slots || !t->hashes) {
        free(t->slots);
        free(t->hashes);
        return 0;
    }
    return 1;
}

static int64_t table_close(group_table *t, int64_t result)
{
    free(t->slots);
    free(t->hashes);
    return result;
}

/* The group of `item` (hash h): an existing one whose first item `same` finds equal, else a
   new one; -1 when max_groups are taken. */
static inline int64_t table_group(group_table *t, uint64_t h, int64_t item,
                                  int (*same)(const void *ctx, int64_t a, int64_t b),
                                  const void *ctx)
{
    int64_t at = (int64_t)(h & (uint64_t)(t->size - 1));
    for (;;) {
        int64_t slot = t->slots[at];
        if (slot == 0) {
            if (t->groups >= t->max_groups)
                return -1;
            int64_t g = t->groups++;
            t->slots[at] = g + 1;
            t->hashes[g] = h;
            t->first[g] = item;
            return g;
        }
        int64_t g = slot - 1;
        if (t->hashes[g] == h && same(ctx, t->first[g], item))
            return g;
        at = (at + 1) & (t->size - 1);
    }
}

/* Hash of the first `width` bytes at p: 8-byte words mixed by multiplication (FNV-1a for
   fields shorter than a word). Equal fields hash equal; groups are compared exactly. */
static inline uint64_t name_hash(const uint8_t *p, int32_t width)
{
    uint64_t h = 1469598103934665603ULL;
    if (width < 8) {
        for (int32_t i = 0; i < width; i++) {
            h ^= p[i];
            h *= 1099511628211ULL;
        }
        return h;
    }
    int32_t i = 0;
    uint64_t w;
    for (; i + 8 <= width; i += 8) {
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 29;
    }
    if (i < width) { /* the last 8 bytes, overlapping the word before */
        memcpy(&w, p + width - 8, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 29;
    }
    return h;
}

/*
 * fixed.device_names' grouping: lines starting at rows[0..k) grouped by their first
 * `width` bytes, compared exactly (a hash only finds the candidates). code[r] is the group of
 * line r, numbered in order of first appearance; first[g] is the first line of group g.
 * Returns the number of groups, or -1 when there are more than max_groups (the caller then
 * uses the reference routine).
 */
typedef struct {
    const uint8_t *buf;
    const int64_t *rows;
    int32_t width;
} names_ctx;

static int same_name(const void *ctx, int64_t a, int64_t b)
{
    const names_ctx *c = ctx;
    return memcmp(c->buf + c->rows[a], c->buf + c->rows[b], (size_t)c->width) == 0;
}

int64_t ig_group_names(const uint8_t *buf, const int64_t *rows, int64_t k, int32_t width,
                       int64_t max_groups, uint32_t *code, int64_t *first)
{
    group_table t;
    if (!table_open(&t, max_groups, first))
        return -1;
    names_ctx ctx = {buf, rows, width};
    int64_t last_row = -1, last_group = -1; /* names repeat in runs: try the last one first */
    for (int64_t r = 0; r < k; r++) {
        const uint8_t *p = buf + rows[r];
        int64_t g = last_group;
        if (!(last_row >= 0 && memcmp(p, buf + last_row, (size_t)width) == 0)) {
            g = table_group(&t, name_hash(p, width), r, same_name, &ctx);
            if (g < 0)
                return table_close(&t, -1);
        }
        code[r] = (uint32_t)g;
        last_row = rows[r];
        last_group = g;
    }
    return table_close(&t, t.groups);
}

/* Whether bytes a and b (of two lines of the same length) have the same shape: equal, or
   both ASCII digits. */
static inline int same_shape(const uint8_t *a, const uint8_t *b, int64_t len)
{
    for (int64_t i = 0; i < len; i++) {
        uint8_t x = a[i], y = b[i];
        if (x != y && !((uint8_t)(x - '0') < 10 && (uint8_t)(y - '0') < 10))
            return 0;
    }
    return 1;
}

/*
 * The lines idx[0..m) grouped by shape: two lines have the same shape when they have the
 * same length and differ only where both have an ASCII digit (compared exactly; a hash of
 * the shape only finds the candidates). code[i] is the group of line idx[i], numbered in
 * order of first appearance; first[g] is the position in idx of group g's first line.
 * Returns the number of groups, or -1 beyond max_groups. lines.classify tests its
 * time-stamp patterns, which treat all digits alike, once per group.
 */
typedef struct {
    const uint8_t *buf;
    const int64_t *starts, *ends, *idx;
} shapes_ctx;

static int same_line_shape(const void *ctx, int64_t a, int64_t b)
{
    const shapes_ctx *c = ctx;
    int64_t ra = c->idx[a], rb = c->idx[b];
    int64_t len = c->ends[ra] - c->starts[ra];
    return c->ends[rb] - c->starts[rb] == len
           && same_shape(c->buf + c->starts[ra], c->buf + c->starts[rb], len);
}

int64_t ig_group_shapes(const uint8_t *buf, const int64_t *starts, const int64_t *ends,
                        const int64_t *idx, int64_t m, int64_t max_groups, uint32_t *code,
                        int64_t *first)
{
    group_table t;
    if (!table_open(&t, max_groups, first))
        return -1;
    shapes_ctx ctx = {buf, starts, ends, idx};
    for (int64_t i = 0; i < m; i++) {
        const uint8_t *p = buf + starts[idx[i]];
        int64_t len = ends[idx[i]] - starts[idx[i]];
        uint64_t h = 1469598103934665603ULL ^ (uint64_t)len;
        for (int64_t j = 0; j < len; j++) { /* FNV-1a of the shape */
            uint8_t c = p[j];
            h ^= (uint8_t)(c - '0') < 10 ? '0' : c;
            h *= 1099511628211ULL;
        }
        int64_t g = table_group(&t, h, i, same_line_shape, &ctx);
        if (g < 0)
            return table_close(&t, -1);
        code[i] = (uint32_t)g;
    }
    return table_close(&t, t.groups);
}

/*
 * Time stamps of one fixed shape as wall-clock microseconds since 1970 (the steady path of
 * the iostat importer; timestamps.parse_local is the reference and reads them with chrono's
 * strptime). Line idx[i] (starts[idx[i]]) must be exactly len bytes: where cls[j] is 0
 * byte j equals tmpl[j], 1 an ASCII digit, 2 one of "AaPp", 3 "M" or "m". at[0..11] are the
 * (offset, length) of year, month, day, hour, minute and second (length 0: absent, read as
 * 0); ampm is the offset of the AM/PM mark (-1: a 24-hour clock). A two-digit year is
 * chrono's %y (00-69: 20xx, 70-99: 19xx). out[i] is the time; ok[i] is 0 where the line
 * does not have the shape or a value is impossible (month 13, 30 February, hour 0 on a
 * 12-hour clock, second 60: chrono reads a leap second, this kernel leaves it to chrono).
 * Returns the number of lines not ok.
 */
static int32_t read_digits(const uint8_t *p, int32_t at, int32_t len)
{
    int32_t v = 0;
    for (int32_t j = 0; j < len; j++)
        v = v * 10 + (p[at + j] - '0');
    return v;
}

int64_t ig_stamps(const uint8_t *buf, const int64_t *starts, const int64_t *ends,
                  const int64_t *idx, int64_t n, const uint8_t *tmpl, const uint8_t *cls,
                  int32_t len, const int32_t *at, int32_t ampm, int64_t *out, uint8_t *ok)
{
    static const int32_t mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *p = buf + starts[idx[i]];
        int good = ends[idx[i]] - starts[idx[i]] == len;
        for (int32_t j = 0; good && j < len; j++) {
            uint8_t c = p[j];
            switch (cls[j]) {
            case 0: good = c == tmpl[j]; break;
            case 1: good = (uint8_t)(c - '0') < 10; break;
            case 2: good = c == 'A' || c == 'a' || c == 'P' || c == 'p'; break;
            default: good = c == 'M' || c == 'm'; break;
            }
        }
        int64_t us = 0;
        if (good) {
            int32_t y = read_digits(p, at[0], at[1]), m = read_digits(p, at[2], at[3]);
            int32_t d = read_digits(p, at[4], at[5]), hh = read_digits(p, at[6], at[7]);
            int32_t mi = read_digits(p, at[8], at[9]), s = read_digits(p, at[10], at[11]);
            if (at[1] == 2)
                y += y < 70 ? 2000 : 1900;
            if (ampm >= 0) { /* %I %p: 12 AM is 00, 12 PM is 12 */
                int pm = p[ampm] == 'P' || p[ampm] == 'p';
                good = hh >= 1 && hh <= 12;
                hh = hh % 12 + (pm ? 12 : 0);
            }
            int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            good = good && m >= 1 && m <= 12 && d >= 1
                   && d <= mdays[m >= 1 && m <= 12 ? m - 1 : 0] + (m == 2 && leap)
                   && hh <= 23 && mi <= 59 && s <= 59;
            if (good) { /* days from civil (H. Hinnant), as timestamps.local_datetimes */
                int64_t ya = y - (m <= 2);
                int64_t era = (ya >= 0 ? ya : ya - 399) / 400;
                int64_t yoe = ya - era * 400;
                int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
                int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
                int64_t days = era * 146097 + doe - 719468;
                us = ((days * 86400 + hh * 3600 + mi * 60 + s)) * 1000000;
            }
        }
        out[i] = us;
        ok[i] = (uint8_t)good;
        bad += !good;
    }
    return bad;
}
