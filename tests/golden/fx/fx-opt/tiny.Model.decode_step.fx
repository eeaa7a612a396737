def forward(self, tokens, cache):
    padding_mask = cache.padding_mask
    layers = cache.layers;  cache = None
    first = layers[0]
    self_attn = first.self_attn;  first = None
    k = self_attn.k;  self_attn = None
    cache_len = k.size(2);  k = None
    embed = self.embed(tokens);  tokens = None
    decoder = self.decoder
    step = decoder.step(embed, layers, padding_mask, cache_len);  decoder = embed = layers = cache_len = None
    x = step[0]
    x_1 = torch.select(x, 1, -1);  x = None
    embed_weight = self.embed.weight
    logits = torch._C._nn.linear(x_1, embed_weight);  x_1 = embed_weight = None
    caches = step[1];  step = None
    cache_1 = attncomp_lower_cache_DecodingCache(padding_mask, caches);  padding_mask = caches = None
    return (logits, cache_1)
    