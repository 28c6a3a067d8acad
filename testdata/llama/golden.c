// golden.c dumps golden data from llama2.c's reference run.c, which it
// includes (built with -DTESTING, so run.c's main is left out): token ids
// of prompts under a tokenizer, and completions of prompts by a model.
// scripts/llama-goldens.sh builds and runs it; see GOLDENS.md here.
//
//   golden tokens TOKENIZER VOCAB_SIZE < prompts.txt
//       one JSON line per prompt: {"tokenizer", "prompt_hex", "ids"}
//   golden generate MODEL TOKENIZER STEPS TEMPERATURE TOPP SEED < prompts.txt
//       one JSON line per prompt: {"prompt_hex", "steps", "temperature",
//       "top_p", "seed", "prompt_ids", "ids", "text", "stdout"}: the loop
//       of run.c's generate(), recording what it prints ("stdout", without
//       the final newline), the generated ids and their text ("text").
//
// prompts.txt has one prompt per line; \n, \t, \r, \\ and \xHH are
// unescaped, so prompts may hold any bytes but NUL.
#include "run.c"

static int unhex(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// read_prompt reads and unescapes one line of stdin into buf; 0 at EOF.
static int read_prompt(char *buf, size_t cap) {
    char line[8192];
    if (fgets(line, sizeof line, stdin) == NULL) return 0;
    size_t n = strlen(line), o = 0;
    if (n > 0 && line[n - 1] == '\n') line[--n] = '\0';
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        char c = line[i];
        if (c == '\\' && i + 1 < n) {
            char e = line[++i];
            if (e == 'n') c = '\n';
            else if (e == 't') c = '\t';
            else if (e == 'r') c = '\r';
            else if (e == 'x' && i + 2 < n + 1 && unhex(line[i + 1]) >= 0 && unhex(line[i + 2]) >= 0) {
                c = (char)(unhex(line[i + 1]) * 16 + unhex(line[i + 2]));
                i += 2;
            } else c = e;
        }
        buf[o++] = c;
    }
    buf[o] = '\0';
    return 1;
}

static void put_hex(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) printf("%02x", *p);
}

// put_json writes s as a JSON string (its bytes are UTF-8: vocabulary
// pieces and the printable bytes safe_printf lets through).
static void put_json(const char *s) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

static void put_ids(const int *ids, int n) {
    putchar('[');
    for (int i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
    putchar(']');
}

// printed returns what safe_printf(piece) prints.
static const char *printed(const char *piece) {
    if (piece == NULL || piece[0] == '\0') return "";
    if (piece[1] == '\0') {
        unsigned char b = piece[0];
        if (!(isprint(b) || isspace(b))) return "";
    }
    return piece;
}

static void tokens(char *path, int vocab) {
    Tokenizer tok;
    build_tokenizer(&tok, path, vocab);
    static char prompt[8192];
    static int ids[8192 + 3];
    char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    while (read_prompt(prompt, sizeof prompt)) {
        int n = 0;
        encode(&tok, prompt, 1, 0, ids, &n);
        printf("{\"tokenizer\":\"%s\",\"prompt_hex\":\"", name);
        put_hex(prompt);
        printf("\",\"ids\":");
        put_ids(ids, n);
        printf("}\n");
    }
    free_tokenizer(&tok);
}

static void generate_json(char *model, char *tokpath, int steps, float temperature, float topp,
                          unsigned long long seed) {
    Transformer t;
    build_transformer(&t, model);
    if (steps <= 0 || steps > t.config.seq_len) steps = t.config.seq_len;
    Tokenizer tok;
    build_tokenizer(&tok, tokpath, t.config.vocab_size);
    static char prompt[8192], out[1 << 20], text[1 << 20];
    static int ids[8192 + 3], gen[8192];
    while (read_prompt(prompt, sizeof prompt)) {
        Sampler sampler;
        build_sampler(&sampler, t.config.vocab_size, temperature, topp, seed);
        int n = 0, ngen = 0;
        encode(&tok, prompt, 1, 0, ids, &n);
        out[0] = text[0] = '\0';
        size_t olen = 0, tlen = 0;
        int token = ids[0], pos = 0, next;
        while (pos < steps) { // run.c's generate()
            float *logits = forward(&t, token, pos);
            int generated = pos >= n - 1;
            next = generated ? sample(&sampler, logits) : ids[pos + 1];
            pos++;
            if (next == 1) break;
            const char *p = printed(decode(&tok, token, next));
            size_t pl = strlen(p);
            if (olen + pl + 1 < sizeof out) { memcpy(out + olen, p, pl + 1); olen += pl; }
            if (generated) {
                gen[ngen++] = next;
                if (tlen + pl + 1 < sizeof text) { memcpy(text + tlen, p, pl + 1); tlen += pl; }
            }
            token = next;
        }
        printf("{\"prompt_hex\":\"");
        put_hex(prompt);
        printf("\",\"steps\":%d,\"temperature\":%g,\"top_p\":%g,\"seed\":%llu,\"prompt_ids\":", steps,
               temperature, topp, seed);
        put_ids(ids, n);
        printf(",\"ids\":");
        put_ids(gen, ngen);
        printf(",\"text\":");
        put_json(text);
        printf(",\"stdout\":");
        put_json(out);
        printf("}\n");
        free_sampler(&sampler);
    }
    free_tokenizer(&tok);
    free_transformer(&t);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "tokens") == 0) {
        tokens(argv[2], atoi(argv[3]));
    } else if (argc == 8 && strcmp(argv[1], "generate") == 0) {
        generate_json(argv[2], argv[3], atoi(argv[4]), atof(argv[5]), atof(argv[6]),
                      strtoull(argv[7], NULL, 10));
    } else {
        fprintf(stderr, "usage: golden tokens TOKENIZER VOCAB_SIZE < prompts.txt\n"
                        "       golden generate MODEL TOKENIZER STEPS TEMPERATURE TOPP SEED < prompts.txt\n");
        return 2;
    }
    return 0;
}
