def forward(self, src, tgt_in):
    padding_mask = attncomp_lower_ops_padding_mask(src, 0)
    embed = self.embed(src)
    mul = torch.mul(embed, 8.0);  embed = None
    size = src.size(1);  src = None
    getattr_1 = mul.device
    arange = torch.arange(0, size, device = getattr_1);  size = getattr_1 = None
    getattr_2 = mul.dtype
    sinusoidal = attncomp_lower_ops_sinusoidal(arange, 64, getattr_2);  arange = getattr_2 = None
    add = torch.add(mul, sinusoidal);  mul = sinusoidal = None
    fully_masked_rows = attncomp_lower_ops_fully_masked_rows(padding_mask)
    encoder_layers_0_self_attn_k_proj = getattr(self.encoder.layers, "0").self_attn.k_proj(add)
    unflatten = torch.unflatten(encoder_layers_0_self_attn_k_proj, -1, (4, 16));  encoder_layers_0_self_attn_k_proj = None
    transpose = torch.transpose(unflatten, 1, 2);  unflatten = None
    encoder_layers_0_self_attn_v_proj = getattr(self.encoder.layers, "0").self_attn.v_proj(add)
    unflatten_1 = torch.unflatten(encoder_layers_0_self_attn_v_proj, -1, (4, 16));  encoder_layers_0_self_attn_v_proj = None
    transpose_1 = torch.transpose(unflatten_1, 1, 2);  unflatten_1 = None
    encoder_layers_0_self_attn_q_proj = getattr(self.encoder.layers, "0").self_attn.q_proj(add)
    unflatten_2 = torch.unflatten(encoder_layers_0_self_attn_q_proj, -1, (4, 16));  encoder_layers_0_self_attn_q_proj = None
    transpose_2 = torch.transpose(unflatten_2, 1, 2);  unflatten_2 = None
    transpose_3 = torch.transpose(transpose, -2, -1);  transpose = None
    matmul = torch.matmul(transpose_2, transpose_3);  transpose_2 = transpose_3 = None
    mul_1 = torch.mul(matmul, 0.25);  matmul = None
    masked_fill = torch.masked_fill(mul_1, padding_mask, -inf);  mul_1 = None
    softmax = torch.softmax(masked_fill, -1);  masked_fill = None
    masked_fill_1 = torch.masked_fill(softmax, fully_masked_rows, 0.0);  softmax = None
    matmul_1 = torch.matmul(masked_fill_1, transpose_1);  masked_fill_1 = transpose_1 = None
    transpose_4 = torch.transpose(matmul_1, 1, 2);  matmul_1 = None
    flatten = torch.flatten(transpose_4, -2);  transpose_4 = None
    encoder_layers_0_self_attn_o_proj = getattr(self.encoder.layers, "0").self_attn.o_proj(flatten);  flatten = None
    add_1 = torch.add(add, encoder_layers_0_self_attn_o_proj);  add = encoder_layers_0_self_attn_o_proj = None
    encoder_layers_0_self_attn_norm = getattr(self.encoder.layers, "0").self_attn_norm(add_1);  add_1 = None
    encoder_layers_0_ffn_fc1 = getattr(self.encoder.layers, "0").ffn.fc1(encoder_layers_0_self_attn_norm)
    relu = torch.relu(encoder_layers_0_ffn_fc1);  encoder_layers_0_ffn_fc1 = None
    encoder_layers_0_ffn_fc2 = getattr(self.encoder.layers, "0").ffn.fc2(relu);  relu = None
    add_2 = torch.add(encoder_layers_0_self_attn_norm, encoder_layers_0_ffn_fc2);  encoder_layers_0_self_attn_norm = encoder_layers_0_ffn_fc2 = None
    encoder_layers_0_ffn_norm = getattr(self.encoder.layers, "0").ffn_norm(add_2);  add_2 = None
    encoder_layers_1_self_attn_k_proj = getattr(self.encoder.layers, "1").self_attn.k_proj(encoder_layers_0_ffn_norm)
    unflatten_3 = torch.unflatten(encoder_layers_1_self_attn_k_proj, -1, (4, 16));  encoder_layers_1_self_attn_k_proj = None
    transpose_5 = torch.transpose(unflatten_3, 1, 2);  unflatten_3 = None
    encoder_layers_1_self_attn_v_proj = getattr(self.encoder.layers, "1").self_attn.v_proj(encoder_layers_0_ffn_norm)
    unflatten_4 = torch.unflatten(encoder_layers_1_self_attn_v_proj, -1, (4, 16));  encoder_layers_1_self_attn_v_proj = None
    transpose_6 = torch.transpose(unflatten_4, 1, 2);  unflatten_4 = None
    encoder_layers_1_self_attn_q_proj = getattr(self.encoder.layers, "1").self_attn.q_proj(encoder_layers_0_ffn_norm)
    unflatten_5 = torch.unflatten(encoder_layers_1_self_attn_q_proj, -1, (4, 16));  encoder_layers_1_self_attn_q_proj = None
    transpose_7 = torch.transpose(unflatten_5, 1, 2);  unflatten_5 = None
    transpose_8 = torch.transpose(transpose_5, -2, -1);  transpose_5 = None
    matmul_2 = torch.matmul(transpose_7, transpose_8);  transpose_7 = transpose_8 = None
    mul_2 = torch.mul(matmul_2, 0.25);  matmul_2 = None
    masked_fill_2 = torch.masked_fill(mul_2, padding_mask, -inf);  mul_2 = None
    softmax_1 = torch.softmax(masked_fill_2, -1);  masked_fill_2 = None
    masked_fill_3 = torch.masked_fill(softmax_1, fully_masked_rows, 0.0);  softmax_1 = fully_masked_rows = None
    matmul_3 = torch.matmul(masked_fill_3, transpose_6);  masked_fill_3 = transpose_6 = None
    transpose_9 = torch.transpose(matmul_3, 1, 2);  matmul_3 = None
    flatten_1 = torch.flatten(transpose_9, -2);  transpose_9 = None
    encoder_layers_1_self_attn_o_proj = getattr(self.encoder.layers, "1").self_attn.o_proj(flatten_1);  flatten_1 = None
    add_3 = torch.add(encoder_layers_0_ffn_norm, encoder_layers_1_self_attn_o_proj);  encoder_layers_0_ffn_norm = encoder_layers_1_self_attn_o_proj = None
    encoder_layers_1_self_attn_norm = getattr(self.encoder.layers, "1").self_attn_norm(add_3);  add_3 = None
    encoder_layers_1_ffn_fc1 = getattr(self.encoder.layers, "1").ffn.fc1(encoder_layers_1_self_attn_norm)
    relu_1 = torch.relu(encoder_layers_1_ffn_fc1);  encoder_layers_1_ffn_fc1 = None
    encoder_layers_1_ffn_fc2 = getattr(self.encoder.layers, "1").ffn.fc2(relu_1);  relu_1 = None
    add_4 = torch.add(encoder_layers_1_self_attn_norm, encoder_layers_1_ffn_fc2);  encoder_layers_1_self_attn_norm = encoder_layers_1_ffn_fc2 = None
    encoder_layers_1_ffn_norm = getattr(self.encoder.layers, "1").ffn_norm(add_4);  add_4 = None
    embed_1 = self.embed(tgt_in)
    mul_3 = torch.mul(embed_1, 8.0);  embed_1 = None
    size_1 = tgt_in.size(1)
    getattr_3 = mul_3.device
    arange_1 = torch.arange(0, size_1, device = getattr_3);  size_1 = getattr_3 = None
    getattr_4 = mul_3.dtype
    sinusoidal_1 = attncomp_lower_ops_sinusoidal(arange_1, 64, getattr_4);  arange_1 = getattr_4 = None
    add_5 = torch.add(mul_3, sinusoidal_1);  mul_3 = sinusoidal_1 = None
    size_2 = tgt_in.size(1)
    getattr_5 = tgt_in.device;  tgt_in = None
    causal_mask = attncomp_lower_ops_causal_mask(size_2, getattr_5);  size_2 = getattr_5 = None
    fully_masked_rows_1 = attncomp_lower_ops_fully_masked_rows(padding_mask)
    decoder_layers_0_self_attn_k_proj = getattr(self.decoder.layers, "0").self_attn.k_proj(add_5)
    unflatten_6 = torch.unflatten(decoder_layers_0_self_attn_k_proj, -1, (4, 16));  decoder_layers_0_self_attn_k_proj = None
    transpose_10 = torch.transpose(unflatten_6, 1, 2);  unflatten_6 = None
    decoder_layers_0_self_attn_v_proj = getattr(self.decoder.layers, "0").self_attn.v_proj(add_5)
    unflatten_7 = torch.unflatten(decoder_layers_0_self_attn_v_proj, -1, (4, 16));  decoder_layers_0_self_attn_v_proj = None
    transpose_11 = torch.transpose(unflatten_7, 1, 2);  unflatten_7 = None
    decoder_layers_0_self_attn_q_proj = getattr(self.decoder.layers, "0").self_attn.q_proj(add_5)
    unflatten_8 = torch.unflatten(decoder_layers_0_self_attn_q_proj, -1, (4, 16));  decoder_layers_0_self_attn_q_proj = None
    transpose_12 = torch.transpose(unflatten_8, 1, 2);  unflatten_8 = None
    transpose_13 = torch.transpose(transpose_10, -2, -1);  transpose_10 = None
    matmul_4 = torch.matmul(transpose_12, transpose_13);  transpose_12 = transpose_13 = None
    mul_4 = torch.mul(matmul_4, 0.25);  matmul_4 = None
    masked_fill_4 = torch.masked_fill(mul_4, causal_mask, -inf);  mul_4 = None
    softmax_2 = torch.softmax(masked_fill_4, -1);  masked_fill_4 = None
    matmul_5 = torch.matmul(softmax_2, transpose_11);  softmax_2 = transpose_11 = None
    transpose_14 = torch.transpose(matmul_5, 1, 2);  matmul_5 = None
    flatten_2 = torch.flatten(transpose_14, -2);  transpose_14 = None
    decoder_layers_0_self_attn_o_proj = getattr(self.decoder.layers, "0").self_attn.o_proj(flatten_2);  flatten_2 = None
    add_6 = torch.add(add_5, decoder_layers_0_self_attn_o_proj);  add_5 = decoder_layers_0_self_attn_o_proj = None
    decoder_layers_0_self_attn_norm = getattr(self.decoder.layers, "0").self_attn_norm(add_6);  add_6 = None
    decoder_layers_0_cross_attn_k_proj = getattr(self.decoder.layers, "0").cross_attn.k_proj(encoder_layers_1_ffn_norm)
    unflatten_9 = torch.unflatten(decoder_layers_0_cross_attn_k_proj, -1, (4, 16));  decoder_layers_0_cross_attn_k_proj = None
    transpose_15 = torch.transpose(unflatten_9, 1, 2);  unflatten_9 = None
    decoder_layers_0_cross_attn_v_proj = getattr(self.decoder.layers, "0").cross_attn.v_proj(encoder_layers_1_ffn_norm)
    unflatten_10 = torch.unflatten(decoder_layers_0_cross_attn_v_proj, -1, (4, 16));  decoder_layers_0_cross_attn_v_proj = None
    transpose_16 = torch.transpose(unflatten_10, 1, 2);  unflatten_10 = None
    decoder_layers_0_cross_attn_q_proj = getattr(self.decoder.layers, "0").cross_attn.q_proj(decoder_layers_0_self_attn_norm)
    unflatten_11 = torch.unflatten(decoder_layers_0_cross_attn_q_proj, -1, (4, 16));  decoder_layers_0_cross_attn_q_proj = None
    transpose_17 = torch.transpose(unflatten_11, 1, 2);  unflatten_11 = None
    transpose_18 = torch.transpose(transpose_15, -2, -1);  transpose_15 = None
    matmul_6 = torch.matmul(transpose_17, transpose_18);  transpose_17 = transpose_18 = None
    mul_5 = torch.mul(matmul_6, 0.25);  matmul_6 = None
    masked_fill_5 = torch.masked_fill(mul_5, padding_mask, -inf);  mul_5 = None
    softmax_3 = torch.softmax(masked_fill_5, -1);  masked_fill_5 = None
    masked_fill_6 = torch.masked_fill(softmax_3, fully_masked_rows_1, 0.0);  softmax_3 = None
    matmul_7 = torch.matmul(masked_fill_6, transpose_16);  masked_fill_6 = transpose_16 = None
    transpose_19 = torch.transpose(matmul_7, 1, 2);  matmul_7 = None
    flatten_3 = torch.flatten(transpose_19, -2);  transpose_19 = None
    decoder_layers_0_cross_attn_o_proj = getattr(self.decoder.layers, "0").cross_attn.o_proj(flatten_3);  flatten_3 = None
    add_7 = torch.add(decoder_layers_0_self_attn_norm, decoder_layers_0_cross_attn_o_proj);  decoder_layers_0_self_attn_norm = decoder_layers_0_cross_attn_o_proj = None
    decoder_layers_0_cross_attn_norm = getattr(self.decoder.layers, "0").cross_attn_norm(add_7);  add_7 = None
    decoder_layers_0_ffn_fc1 = getattr(self.decoder.layers, "0").ffn.fc1(decoder_layers_0_cross_attn_norm)
    relu_2 = torch.relu(decoder_layers_0_ffn_fc1);  decoder_layers_0_ffn_fc1 = None
    decoder_layers_0_ffn_fc2 = getattr(self.decoder.layers, "0").ffn.fc2(relu_2);  relu_2 = None
    add_8 = torch.add(decoder_layers_0_cross_attn_norm, decoder_layers_0_ffn_fc2);  decoder_layers_0_cross_attn_norm = decoder_layers_0_ffn_fc2 = None
    decoder_layers_0_ffn_norm = getattr(self.decoder.layers, "0").ffn_norm(add_8);  add_8 = None
    decoder_layers_1_self_attn_k_proj = getattr(self.decoder.layers, "1").self_attn.k_proj(decoder_layers_0_ffn_norm)
    unflatten_12 = torch.unflatten(decoder_layers_1_self_attn_k_proj, -1, (4, 16));  decoder_layers_1_self_attn_k_proj = None
    transpose_20 = torch.transpose(unflatten_12, 1, 2);  unflatten_12 = None
    decoder_layers_1_self_attn_v_proj = getattr(self.decoder.layers, "1").self_attn.v_proj(decoder_layers_0_ffn_norm)
    unflatten_13 = torch.unflatten(decoder_layers_1_self_attn_v_proj, -1, (4, 16));  decoder_layers_1_self_attn_v_proj = None
    transpose_21 = torch.transpose(unflatten_13, 1, 2);  unflatten_13 = None
    decoder_layers_1_self_attn_q_proj = getattr(self.decoder.layers, "1").self_attn.q_proj(decoder_layers_0_ffn_norm)
    unflatten_14 = torch.unflatten(decoder_layers_1_self_attn_q_proj, -1, (4, 16));  decoder_layers_1_self_attn_q_proj = None
    transpose_22 = torch.transpose(unflatten_14, 1, 2);  unflatten_14 = None
    transpose_23 = torch.transpose(transpose_20, -2, -1);  transpose_20 = None
    matmul_8 = torch.matmul(transpose_22, transpose_23);  transpose_22 = transpose_23 = None
    mul_6 = torch.mul(matmul_8, 0.25);  matmul_8 = None
    masked_fill_7 = torch.masked_fill(mul_6, causal_mask, -inf);  mul_6 = causal_mask = None
    softmax_4 = torch.softmax(masked_fill_7, -1);  masked_fill_7 = None
    matmul_9 = torch.matmul(softmax_4, transpose_21);  softmax_4 = transpose_21 = None
    transpose_24 = torch.transpose(matmul_9, 1, 2);  matmul_9 = None
    flatten_4 = torch.flatten(transpose_24, -2);  transpose_24 = None
    decoder_layers_1_self_attn_o_proj = getattr(self.decoder.layers, "1").self_attn.o_proj(flatten_4);  flatten_4 = None
    add_9 = torch.add(decoder_layers_0_ffn_norm, decoder_layers_1_self_attn_o_proj);  decoder_layers_0_ffn_norm = decoder_layers_1_self_attn_o_proj = None
    decoder_layers_1_self_attn_norm = getattr(self.decoder.layers, "1").self_attn_norm(add_9);  add_9 = None
    decoder_layers_1_cross_attn_k_proj = getattr(self.decoder.layers, "1").cross_attn.k_proj(encoder_layers_1_ffn_norm)
    unflatten_15 = torch.unflatten(decoder_layers_1_cross_attn_k_proj, -1, (4, 16));  decoder_layers_1_cross_attn_k_proj = None
    transpose_25 = torch.transpose(unflatten_15, 1, 2);  unflatten_15 = None
    decoder_layers_1_cross_attn_v_proj = getattr(self.decoder.layers, "1").cross_attn.v_proj(encoder_layers_1_ffn_norm);  encoder_layers_1_ffn_norm = None
    unflatten_16 = torch.unflatten(decoder_layers_1_cross_attn_v_proj, -1, (4, 16));  decoder_layers_1_cross_attn_v_proj = None
    transpose_26 = torch.transpose(unflatten_16, 1, 2);  unflatten_16 = None
    decoder_layers_1_cross_attn_q_proj = getattr(self.decoder.layers, "1").cross_attn.q_proj(decoder_layers_1_self_attn_norm)
    unflatten_17 = torch.unflatten(decoder_layers_1_cross_attn_q_proj, -1, (4, 16));  decoder_layers_1_cross_attn_q_proj = None
    transpose_27 = torch.transpose(unflatten_17, 1, 2);  unflatten_17 = None
    transpose_28 = torch.transpose(transpose_25, -2, -1);  transpose_25 = None
    matmul_10 = torch.matmul(transpose_27, transpose_28);  transpose_27 = transpose_28 = None
    mul_7 = torch.mul(matmul_10, 0.25);  matmul_10 = None
    masked_fill_8 = torch.masked_fill(mul_7, padding_mask, -inf);  mul_7 = padding_mask = None
    softmax_5 = torch.softmax(masked_fill_8, -1);  masked_fill_8 = None
    masked_fill_9 = torch.masked_fill(softmax_5, fully_masked_rows_1, 0.0);  softmax_5 = fully_masked_rows_1 = None
    matmul_11 = torch.matmul(masked_fill_9, transpose_26);  masked_fill_9 = transpose_26 = None
    transpose_29 = torch.transpose(matmul_11, 1, 2);  matmul_11 = None
    flatten_5 = torch.flatten(transpose_29, -2);  transpose_29 = None
    decoder_layers_1_cross_attn_o_proj = getattr(self.decoder.layers, "1").cross_attn.o_proj(flatten_5);  flatten_5 = None
    add_10 = torch.add(decoder_layers_1_self_attn_norm, decoder_layers_1_cross_attn_o_proj);  decoder_layers_1_self_attn_norm = decoder_layers_1_cross_attn_o_proj = None
    decoder_layers_1_cross_attn_norm = getattr(self.decoder.layers, "1").cross_attn_norm(add_10);  add_10 = None
    decoder_layers_1_ffn_fc1 = getattr(self.decoder.layers, "1").ffn.fc1(decoder_layers_1_cross_attn_norm)
    relu_3 = torch.relu(decoder_layers_1_ffn_fc1);  decoder_layers_1_ffn_fc1 = None
    decoder_layers_1_ffn_fc2 = getattr(self.decoder.layers, "1").ffn.fc2(relu_3);  relu_3 = None
    add_11 = torch.add(decoder_layers_1_cross_attn_norm, decoder_layers_1_ffn_fc2);  decoder_layers_1_cross_attn_norm = decoder_layers_1_ffn_fc2 = None
    decoder_layers_1_ffn_norm = getattr(self.decoder.layers, "1").ffn_norm(add_11);  add_11 = None
    return decoder_layers_1_ffn_norm
    