def forward(self, tokens, cache):
    padding_mask = cache.padding_mask
    layers = cache.layers
    position = cache.position;  cache = None
    start = position[0]
    embed = self.embed(tokens);  tokens = None
    decoder = self.decoder
    step = decoder.step(embed, layers, padding_mask, start);  decoder = embed = layers = start = None
    x = step[0]
    x_1 = torch.select(x, 1, -1);  x = None
    embed_weight = self.embed.weight
    logits = torch._C._nn.linear(x_1, embed_weight);  x_1 = embed_weight = None
    position_1 = torch.add(position, 1);  position = None
    caches = step[1];  step = None
    cache_1 = attncomp_lower_cache_DecodingCache(padding_mask, caches, position_1);  padding_mask = caches = position_1 = None
    return (logits, cache_1)
    