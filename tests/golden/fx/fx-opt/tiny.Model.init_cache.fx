def forward(self, src, memory):
    decoder = self.decoder
    init_cache = decoder.init_cache(memory);  decoder = memory = None
    batch = src.size(0)
    position = src.new_zeros((batch,));  batch = None
    padding_mask = attncomp_lower_ops_padding_mask(src, 0);  src = None
    cache = attncomp_lower_cache_DecodingCache(padding_mask, init_cache, position);  padding_mask = init_cache = position = None
    return cache
    