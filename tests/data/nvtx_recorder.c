/* A minimal NVTX tool, standing in for Nsight Systems where there is no GPU profiler.
 *
 * The NVTX library a program calls (here, the one inside the `nvtx` Python package) loads the
 * shared library named by NVTX_INJECTION64_PATH on its first call and asks it for its callbacks;
 * without one every NVTX call returns at once. This tool counts the ranges it receives and, when
 * NVTX_RECORD_FILE names a file, appends one line per event:
 *
 *     push DOMAIN MESSAGE PAYLOAD      pop DOMAIN
 *     start DOMAIN MESSAGE PAYLOAD ID  end DOMAIN ID
 *
 * (PAYLOAD is "-" when the event has none.) Build: cc -shared -fPIC -O2 -o nvtx_recorder.so
 * nvtx_recorder.c. The types below are those of NVTX v3 (nvtx3/nvToolsExt.h,
 * nvtx3/nvtxDetail/nvtxTypes.h), written out so that no CUDA header is needed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*NvtxFunctionPointer)(void);
typedef NvtxFunctionPointer **NvtxFunctionTable;
typedef struct {
    size_t struct_size;
    int (*GetModuleFunctionTable)(int module, NvtxFunctionTable *table, unsigned int *size);
} NvtxExportTableCallbacks;
typedef const void *(*NvtxGetExportTableFunc)(uint32_t id);

typedef struct {
    uint16_t version;
    uint16_t size;
    uint32_t category;
    int32_t colorType;
    uint32_t color;
    int32_t payloadType;
    int32_t reserved0;
    union {
        uint64_t ullValue;
        int64_t llValue;
        double dValue;
        uint32_t uiValue;
        int32_t iValue;
        float fValue;
    } payload;
    int32_t messageType;
    union {
        const char *ascii;
        const void *unicode;
        const void *registered;
    } message;
} EventAttributes;

enum { ETID_CALLBACKS = 1, MODULE_CORE2 = 5 };
enum {
    CBID_RANGE_START_EX = 2,
    CBID_RANGE_END = 3,
    CBID_RANGE_PUSH_EX = 4,
    CBID_RANGE_POP = 5,
    CBID_REGISTER_STRING_A = 10,
    CBID_DOMAIN_CREATE_A = 12,
};
enum { MESSAGE_ASCII = 1, MESSAGE_REGISTERED = 3 };
enum { PAYLOAD_U64 = 1, PAYLOAD_I64 = 2, PAYLOAD_DOUBLE = 3, PAYLOAD_U32 = 4, PAYLOAD_I32 = 5 };

typedef struct { char name[64]; } Domain;      /* what a domain handle points to */
typedef struct { char text[128]; } Registered; /* what a registered string handle points to */

/* Read with ctypes by a process that loaded this tool. */
unsigned long long nvtx_recorder_pushes, nvtx_recorder_pops, nvtx_recorder_starts,
    nvtx_recorder_ends;

static FILE *record;
static unsigned long long next_range_id = 1;

static const char *domain_name(const void *domain) {
    return domain ? ((const Domain *)domain)->name : "-";
}

static const char *message_text(const EventAttributes *a) {
    if (a->messageType == MESSAGE_REGISTERED && a->message.registered)
        return ((const Registered *)a->message.registered)->text;
    if (a->messageType == MESSAGE_ASCII && a->message.ascii)
        return a->message.ascii;
    return "-";
}

static void payload_text(const EventAttributes *a, char *out, size_t size) {
    switch (a->payloadType) {
    case PAYLOAD_U64: snprintf(out, size, "%llu", (unsigned long long)a->payload.ullValue); break;
    case PAYLOAD_I64: snprintf(out, size, "%lld", (long long)a->payload.llValue); break;
    case PAYLOAD_DOUBLE: snprintf(out, size, "%g", a->payload.dValue); break;
    case PAYLOAD_U32: snprintf(out, size, "%u", a->payload.uiValue); break;
    case PAYLOAD_I32: snprintf(out, size, "%d", a->payload.iValue); break;
    default: snprintf(out, size, "-");
    }
}

static void *domain_create(const char *name) {
    Domain *d = calloc(1, sizeof(Domain));
    if (d && name)
        strncpy(d->name, name, sizeof(d->name) - 1);
    return d;
}

static void *register_string(const void *domain, const char *text) {
    (void)domain;
    Registered *r = calloc(1, sizeof(Registered));
    if (r && text)
        strncpy(r->text, text, sizeof(r->text) - 1);
    return r;
}

static int range_push(const void *domain, const EventAttributes *a) {
    __atomic_add_fetch(&nvtx_recorder_pushes, 1, __ATOMIC_RELAXED);
    if (record) {
        char payload[64];
        payload_text(a, payload, sizeof(payload));
        fprintf(record, "push %s %s %s\n", domain_name(domain), message_text(a), payload);
        fflush(record);
    }
    return 0;
}

static int range_pop(const void *domain) {
    __atomic_add_fetch(&nvtx_recorder_pops, 1, __ATOMIC_RELAXED);
    if (record) {
        fprintf(record, "pop %s\n", domain_name(domain));
        fflush(record);
    }
    return 0;
}

static uint64_t range_start(const void *domain, const EventAttributes *a) {
    unsigned long long id = __atomic_fetch_add(&next_range_id, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&nvtx_recorder_starts, 1, __ATOMIC_RELAXED);
    if (record) {
        char payload[64];
        payload_text(a, payload, sizeof(payload));
        fprintf(record, "start %s %s %s %llu\n", domain_name(domain), message_text(a), payload, id);
        fflush(record);
    }
    return id;
}

static void range_end(const void *domain, uint64_t id) {
    __atomic_add_fetch(&nvtx_recorder_ends, 1, __ATOMIC_RELAXED);
    if (record) {
        fprintf(record, "end %s %llu\n", domain_name(domain), (unsigned long long)id);
        fflush(record);
    }
}

static void set(NvtxFunctionTable table, unsigned int size, unsigned int id, NvtxFunctionPointer f) {
    if (id < size && table[id])
        *table[id] = f;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc get_export_table) {
    const NvtxExportTableCallbacks *callbacks = get_export_table(ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!callbacks || !callbacks->GetModuleFunctionTable(MODULE_CORE2, &table, &size) || !table)
        return 0;
    const char *path = getenv("NVTX_RECORD_FILE");
    if (path && *path)
        record = fopen(path, "a");
    set(table, size, CBID_DOMAIN_CREATE_A, (NvtxFunctionPointer)domain_create);
    set(table, size, CBID_REGISTER_STRING_A, (NvtxFunctionPointer)register_string);
    set(table, size, CBID_RANGE_PUSH_EX, (NvtxFunctionPointer)range_push);
    set(table, size, CBID_RANGE_POP, (NvtxFunctionPointer)range_pop);
    set(table, size, CBID_RANGE_START_EX, (NvtxFunctionPointer)range_start);
    set(table, size, CBID_RANGE_END, (NvtxFunctionPointer)range_end);
    return 1;
}
