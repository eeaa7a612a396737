def forward(self, src, tgt_in):
    padding_mask = attncomp_lower_ops_padding_mask(src, 0)
    embed = self.embed(src);  src = None
    encoder = self.encoder(embed, padding_mask);  embed = None
    embed_1 = self.embed(tgt_in);  tgt_in = None
    decoder = self.decoder(embed_1, encoder, padding_mask);  embed_1 = encoder = padding_mask = None
    return decoder
    