// llama2c-ids: the token ids behind one run of llama2.c's run.c, for the
// goldens of scripts/llama-golden.sh. Built with run.c itself, included
// below with TESTING defined (which leaves out its main), so that the
// model, the tokenizer's encode and the sampler are run.c's own:
//
//   cc -O3 -DTESTING -I DIR_OF_RUN_C -o llama2c-ids llama2c-ids.c -lm
//   llama2c-ids MODEL TOKENIZER TEMPERATURE TOPP SEED STEPS PROMPT
//
// It runs run.c's generate loop's schedule (the prompt's tokens forced,
// then sampled ones, stopping at BOS or after STEPS positions) and prints
// one JSON object: the prompt's ids (BOS first), the generated ids, and why
// it stopped ("bos" or "length"). The script checks that the ids decode to
// what run.c's own binary printed.
#define TESTING
#include "run.c"

int main(int argc, char *argv[]) {
    if (argc != 8) {
        fprintf(stderr, "usage: llama2c-ids MODEL TOKENIZER TEMPERATURE TOPP SEED STEPS PROMPT\n");
        return 2;
    }
    Transformer model;
    build_transformer(&model, argv[1]);
    Tokenizer tok;
    build_tokenizer(&tok, argv[2], model.config.vocab_size);
    Sampler sampler;
    unsigned long long seed = strtoull(argv[5], NULL, 10);
    build_sampler(&sampler, model.config.vocab_size, atof(argv[3]), atof(argv[4]), seed);
    int steps = atoi(argv[6]);
    if (steps <= 0 || steps > model.config.seq_len) steps = model.config.seq_len;
    char *prompt = argv[7];

    int *ids = malloc((strlen(prompt) + 3) * sizeof(int));
    int n_ids = 0;
    encode(&tok, prompt, 1, 0, ids, &n_ids);

    printf("{\"prompt_ids\":[");
    for (int i = 0; i < n_ids; i++) printf(i ? ",%d" : "%d", ids[i]);
    printf("],\"ids\":[");
    const char *stop = "length";
    int cur = ids[0], generated = 0;
    for (int pos = 0; pos < steps; pos++) {
        float *logits = forward(&model, cur, pos);
        int next = pos + 1 < n_ids ? ids[pos + 1] : sample(&sampler, logits);
        if (next == 1) { stop = "bos"; break; }
        if (pos + 1 >= n_ids) printf(generated++ ? ",%d" : "%d", next);
        cur = next;
    }
    printf("],\"stop\":\"%s\"}\n", stop);
    free(ids);
    free_sampler(&sampler);
    free_tokenizer(&tok);
    free_transformer(&model);
    return 0;
}
