// ggml-dequant: the tensors of a GGUF file as ggml itself reads them, for
// scripts/llamacpp.sh (built there against the ggml of node-llama-cpp's
// prebuilt libraries, headers from its llama.cpp source bundle):
//
//   ggml-dequant list MODEL.gguf
//       one JSON object a line per tensor, in file order:
//       {"name":..., "type":"q4_K", "ne":[ne0, ne1, ...], "offset":N, "size":N}
//       (ne0 is the row length; offset is from the file's start)
//   ggml-dequant dequant MODEL.gguf TENSOR OUT.bin
//       writes TENSOR as little-endian float32, row-major (ne0 fastest),
//       converted by ggml's reference routine for its type,
//       ggml_get_type_traits(type)->to_float (f32 is copied as is)
//
// Exit status 1 with a message on stderr for a missing tensor or a type
// ggml cannot convert to float.
#include "ggml.h"
#include "gguf.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static void die(const char * msg, const char * arg) {
    fprintf(stderr, "ggml-dequant: %s%s\n", msg, arg);
    exit(1);
}

static void json_string(const char * s) {
    putchar('"');
    for (const unsigned char * p = (const unsigned char *) s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            printf("\\%c", *p);
        } else if (*p < 0x20) {
            printf("\\u%04x", *p);
        } else {
            putchar(*p);
        }
    }
    putchar('"');
}

int main(int argc, char ** argv) {
    const uint32_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    if (first != 1) {
        die("needs a little-endian host", "");
    }
    const bool list = argc == 3 && strcmp(argv[1], "list") == 0;
    const bool dequant = argc == 5 && strcmp(argv[1], "dequant") == 0;
    if (!list && !dequant) {
        fprintf(stderr, "usage: ggml-dequant list MODEL.gguf | dequant MODEL.gguf TENSOR OUT.bin\n");
        return 2;
    }
    const char * path = argv[2];
    ggml_context * meta = nullptr;
    gguf_init_params params = { /*no_alloc =*/ true, /*ctx =*/ &meta };
    gguf_context * g = gguf_init_from_file(path, params);
    if (g == nullptr) {
        die("cannot read GGUF file ", path);
    }
    const size_t data = gguf_get_data_offset(g);
    const int64_t n = gguf_get_n_tensors(g);
    if (list) {
        for (int64_t i = 0; i < n; i++) {
            const char * name = gguf_get_tensor_name(g, i);
            const ggml_tensor * t = ggml_get_tensor(meta, name);
            fputs("{\"name\":", stdout);
            json_string(name);
            printf(",\"type\":\"%s\",\"ne\":[", ggml_type_name(t->type));
            const int nd = ggml_n_dims(t);
            for (int d = 0; d < nd; d++) {
                printf("%s%" PRId64, d ? "," : "", t->ne[d]);
            }
            printf("],\"offset\":%zu,\"size\":%zu}\n", data + gguf_get_tensor_offset(g, i), gguf_get_tensor_size(g, i));
        }
        return 0;
    }

    const char * name = argv[3];
    const int64_t id = gguf_find_tensor(g, name);
    if (id < 0) {
        die("no tensor ", name);
    }
    const ggml_tensor * t = ggml_get_tensor(meta, name);
    const ggml_type type = t->type;
    const ggml_type_traits * tr = ggml_get_type_traits(type);
    if (type != GGML_TYPE_F32 && tr->to_float == nullptr) {
        die("ggml has no conversion to float for type ", ggml_type_name(type));
    }
    const int64_t ne0 = t->ne[0];
    const int64_t rows = ggml_nrows(t);
    const size_t row_bytes = ggml_row_size(type, ne0);
    if (row_bytes * rows != gguf_get_tensor_size(g, id)) {
        die("unexpected size of tensor ", name);
    }
    FILE * in = fopen(path, "rb");
    if (in == nullptr) {
        die("cannot open ", path);
    }
    if (fseeko(in, (off_t) (data + gguf_get_tensor_offset(g, id)), SEEK_SET) != 0) {
        die("cannot seek in ", path);
    }
    FILE * out = fopen(argv[4], "wb");
    if (out == nullptr) {
        die("cannot create ", argv[4]);
    }
    // A few MiB of rows at a time.
    const int64_t chunk = row_bytes >= (4u << 20) ? 1 : (int64_t) ((4u << 20) / row_bytes);
    std::vector<uint8_t> src(row_bytes * chunk);
    std::vector<float> dst(ne0 * chunk);
    for (int64_t r = 0; r < rows; r += chunk) {
        const int64_t nr = rows - r < chunk ? rows - r : chunk;
        if (fread(src.data(), row_bytes, nr, in) != (size_t) nr) {
            die("short read of tensor ", name);
        }
        if (type == GGML_TYPE_F32) {
            memcpy(dst.data(), src.data(), row_bytes * nr);
        } else {
            for (int64_t i = 0; i < nr; i++) {
                tr->to_float(src.data() + i * row_bytes, dst.data() + i * ne0, ne0);
            }
        }
        if (fwrite(dst.data(), sizeof(float) * ne0, nr, out) != (size_t) nr) {
            die("cannot write ", argv[4]);
        }
    }
    if (fclose(out) != 0) {
        die("cannot write ", argv[4]);
    }
    fclose(in);
    gguf_free(g);
    ggml_free(meta);
    return 0;
}
