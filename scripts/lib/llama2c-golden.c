// llama2c-golden: the token ids behind llama2.c's run.c, for the goldens of
// scripts/llama-goldens.sh (and the prompt lengths of scripts/llama-bench.sh).
// It includes run.c itself, with TESTING defined (which leaves out its
// main), so that the model, the tokenizer's encode and the sampler are
// run.c's own; nothing of run.c is copied. scripts/lib/llama.sh builds it:
//
//   cc -O3 -I DIR_OF_RUN_C -o golden llama2c-golden.c -lm
//
//   golden encode TOKENIZER VOCAB_SIZE PROMPT
//       {"ids": [...]}: run.c's encode of PROMPT, BOS added, no EOS.
//   golden generate MODEL TOKENIZER TEMPERATURE TOPP SEED STEPS PROMPT
//       {"prompt_ids", "ids", "margins", "stop"}: run.c's generate loop
//       (the prompt's tokens forced, then sampled ones, stopping at BOS or
//       after STEPS positions; STEPS 0 or past the context is the context),
//       with the prompt's ids (BOS first), the generated ids, for each
//       generated id the logits' margin (the largest logit less the second
//       largest, before sampling), and why it stopped ("bos" or "length").
//
// The script checks that the ids decode to what run.c's own binary printed.
#define TESTING
#include "run.c"

static void put_ids(const int *ids, int n) {
    putchar('[');
    for (int i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
    putchar(']');
}

// margin is the largest of n logits less the second largest.
static float margin(const float *logits, int n) {
    float a = -INFINITY, b = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (logits[i] > a) {
            b = a;
            a = logits[i];
        } else if (logits[i] > b) {
            b = logits[i];
        }
    }
    return a - b;
}

static int encode_main(char *tokpath, int vocab, char *prompt) {
    Tokenizer tok;
    build_tokenizer(&tok, tokpath, vocab);
    int *ids = malloc((strlen(prompt) + 3) * sizeof(int));
    int n = 0;
    encode(&tok, prompt, 1, 0, ids, &n);
    printf("{\"ids\":");
    put_ids(ids, n);
    printf("}\n");
    free(ids);
    free_tokenizer(&tok);
    return 0;
}

static int generate_main(char *model_path, char *tokpath, float temperature, float topp,
                         unsigned long long seed, int steps, char *prompt) {
    Transformer model;
    build_transformer(&model, model_path);
    int vocab = model.config.vocab_size;
    Tokenizer tok;
    build_tokenizer(&tok, tokpath, vocab);
    Sampler sampler;
    build_sampler(&sampler, vocab, temperature, topp, seed);
    if (steps <= 0 || steps > model.config.seq_len) steps = model.config.seq_len;

    int *ids = malloc((strlen(prompt) + 3) * sizeof(int));
    int n_ids = 0;
    encode(&tok, prompt, 1, 0, ids, &n_ids);
    int *gen = malloc(steps * sizeof(int));
    float *margins = malloc(steps * sizeof(float));
    int n_gen = 0;
    const char *stop = "length";
    int cur = ids[0];
    for (int pos = 0; pos < steps; pos++) {
        float *logits = forward(&model, cur, pos);
        int next;
        if (pos + 1 < n_ids) {
            next = ids[pos + 1];
        } else {
            float m = margin(logits, vocab); // sample may scale logits in place
            next = sample(&sampler, logits);
            if (next != 1) {
                margins[n_gen] = m;
                gen[n_gen++] = next;
            }
        }
        if (next == 1) {
            stop = "bos";
            break;
        }
        cur = next;
    }
    printf("{\"prompt_ids\":");
    put_ids(ids, n_ids);
    printf(",\"ids\":");
    put_ids(gen, n_gen);
    printf(",\"margins\":[");
    for (int i = 0; i < n_gen; i++) printf(i ? ",%.4g" : "%.4g", margins[i]);
    printf("],\"stop\":\"%s\"}\n", stop);
    free(margins);
    free(gen);
    free(ids);
    free_sampler(&sampler);
    free_tokenizer(&tok);
    free_transformer(&model);
    return 0;
}

int main(int argc, char *argv[]) {
    if (argc == 5 && strcmp(argv[1], "encode") == 0) {
        return encode_main(argv[2], atoi(argv[3]), argv[4]);
    }
    if (argc == 9 && strcmp(argv[1], "generate") == 0) {
        return generate_main(argv[2], argv[3], atof(argv[4]), atof(argv[5]), strtoull(argv[6], NULL, 10),
                             atoi(argv[7]), argv[8]);
    }
    fprintf(stderr, "usage: golden encode TOKENIZER VOCAB_SIZE PROMPT\n"
                    "       golden generate MODEL TOKENIZER TEMPERATURE TOPP SEED STEPS PROMPT\n");
    return 2;
}
