def forward(self, src, tgt_in):
    embed = self.embed(src);  src = None
    encoder = self.encoder(embed, None);  embed = None
    embed_1 = self.embed(tgt_in);  tgt_in = None
    decoder = self.decoder(embed_1, encoder, None);  embed_1 = encoder = None
    return decoder
    