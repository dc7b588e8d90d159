// The byte layout of every args struct of shaders/kargs.h, as the host compiler lays it out: size and
// the offset of each field. Apple's compiler lays the same header out by the same rules (4- and 8-byte
// scalars at their natural alignment); a change to a struct that moves a field, or padding a new
// compiler adds, stops the build here instead of handing kernels shifted arguments. Regenerate the
// numbers only together with a deliberate change to kargs.h.
#include <cstddef>

#include "kargs.h"

#define MB_KARGS_SIZE(S, N) static_assert(sizeof(S) == (N), #S " changed size")
#define MB_KARGS_AT(S, F, O) static_assert(offsetof(S, F) == (O), #S "." #F " moved")


MB_KARGS_SIZE(mb_kargs_bin, 480);
MB_KARGS_AT(mb_kargs_bin, ne00, 0); MB_KARGS_AT(mb_kargs_bin, ne01, 4); MB_KARGS_AT(mb_kargs_bin, ne02, 8);
MB_KARGS_AT(mb_kargs_bin, ne03, 12); MB_KARGS_AT(mb_kargs_bin, nb00, 16); MB_KARGS_AT(mb_kargs_bin, nb01, 24);
MB_KARGS_AT(mb_kargs_bin, nb02, 32); MB_KARGS_AT(mb_kargs_bin, nb03, 40); MB_KARGS_AT(mb_kargs_bin, ne0, 48);
MB_KARGS_AT(mb_kargs_bin, ne1, 52); MB_KARGS_AT(mb_kargs_bin, ne2, 56); MB_KARGS_AT(mb_kargs_bin, ne3, 60);
MB_KARGS_AT(mb_kargs_bin, nb0, 64); MB_KARGS_AT(mb_kargs_bin, nb1, 72); MB_KARGS_AT(mb_kargs_bin, nb2, 80);
MB_KARGS_AT(mb_kargs_bin, nb3, 88); MB_KARGS_AT(mb_kargs_bin, ne1x, 96); MB_KARGS_AT(mb_kargs_bin, nb1x, 224);

MB_KARGS_SIZE(mb_kargs_unary, 96);
MB_KARGS_AT(mb_kargs_unary, n, 0); MB_KARGS_AT(mb_kargs_unary, p0, 4); MB_KARGS_AT(mb_kargs_unary, p1, 8);
MB_KARGS_AT(mb_kargs_unary, ne00, 12); MB_KARGS_AT(mb_kargs_unary, ne01, 16); MB_KARGS_AT(mb_kargs_unary, ne02, 20);
MB_KARGS_AT(mb_kargs_unary, ne03, 24); MB_KARGS_AT(mb_kargs_unary, nb00, 32); MB_KARGS_AT(mb_kargs_unary, nb01, 40);
MB_KARGS_AT(mb_kargs_unary, nb02, 48); MB_KARGS_AT(mb_kargs_unary, nb03, 56); MB_KARGS_AT(mb_kargs_unary, nb0, 64);
MB_KARGS_AT(mb_kargs_unary, nb1, 72); MB_KARGS_AT(mb_kargs_unary, nb2, 80); MB_KARGS_AT(mb_kargs_unary, nb3, 88);

MB_KARGS_SIZE(mb_kargs_norm, 152);
MB_KARGS_AT(mb_kargs_norm, ne00, 0); MB_KARGS_AT(mb_kargs_norm, ne01, 4); MB_KARGS_AT(mb_kargs_norm, ne02, 8);
MB_KARGS_AT(mb_kargs_norm, ne03, 12); MB_KARGS_AT(mb_kargs_norm, nb01, 16); MB_KARGS_AT(mb_kargs_norm, nb02, 24);
MB_KARGS_AT(mb_kargs_norm, nb03, 32); MB_KARGS_AT(mb_kargs_norm, nb1, 40); MB_KARGS_AT(mb_kargs_norm, nb2, 48);
MB_KARGS_AT(mb_kargs_norm, nb3, 56); MB_KARGS_AT(mb_kargs_norm, ne10, 64); MB_KARGS_AT(mb_kargs_norm, ne11, 68);
MB_KARGS_AT(mb_kargs_norm, ne12, 72); MB_KARGS_AT(mb_kargs_norm, ne13, 76); MB_KARGS_AT(mb_kargs_norm, nb11, 80);
MB_KARGS_AT(mb_kargs_norm, nb12, 88); MB_KARGS_AT(mb_kargs_norm, nb13, 96); MB_KARGS_AT(mb_kargs_norm, ne20, 104);
MB_KARGS_AT(mb_kargs_norm, ne21, 108); MB_KARGS_AT(mb_kargs_norm, ne22, 112); MB_KARGS_AT(mb_kargs_norm, ne23, 116);
MB_KARGS_AT(mb_kargs_norm, nb21, 120); MB_KARGS_AT(mb_kargs_norm, nb22, 128); MB_KARGS_AT(mb_kargs_norm, nb23, 136);
MB_KARGS_AT(mb_kargs_norm, nk, 144); MB_KARGS_AT(mb_kargs_norm, eps, 148);

MB_KARGS_SIZE(mb_kargs_soft_max, 128);
MB_KARGS_AT(mb_kargs_soft_max, ne00, 0); MB_KARGS_AT(mb_kargs_soft_max, ne01, 4);
MB_KARGS_AT(mb_kargs_soft_max, ne02, 8); MB_KARGS_AT(mb_kargs_soft_max, ne03, 12);
MB_KARGS_AT(mb_kargs_soft_max, nb01, 16); MB_KARGS_AT(mb_kargs_soft_max, nb02, 24);
MB_KARGS_AT(mb_kargs_soft_max, nb03, 32); MB_KARGS_AT(mb_kargs_soft_max, ne11, 40);
MB_KARGS_AT(mb_kargs_soft_max, ne12, 44); MB_KARGS_AT(mb_kargs_soft_max, ne13, 48);
MB_KARGS_AT(mb_kargs_soft_max, nb11, 56); MB_KARGS_AT(mb_kargs_soft_max, nb12, 64);
MB_KARGS_AT(mb_kargs_soft_max, nb13, 72); MB_KARGS_AT(mb_kargs_soft_max, nb1, 80);
MB_KARGS_AT(mb_kargs_soft_max, nb2, 88); MB_KARGS_AT(mb_kargs_soft_max, nb3, 96);
MB_KARGS_AT(mb_kargs_soft_max, nk, 104); MB_KARGS_AT(mb_kargs_soft_max, scale, 108);
MB_KARGS_AT(mb_kargs_soft_max, max_bias, 112); MB_KARGS_AT(mb_kargs_soft_max, m0, 116);
MB_KARGS_AT(mb_kargs_soft_max, m1, 120); MB_KARGS_AT(mb_kargs_soft_max, n_head_log2, 124);

MB_KARGS_SIZE(mb_kargs_reduce, 80);
MB_KARGS_AT(mb_kargs_reduce, ne00, 0); MB_KARGS_AT(mb_kargs_reduce, ne01, 4); MB_KARGS_AT(mb_kargs_reduce, ne02, 8);
MB_KARGS_AT(mb_kargs_reduce, ne03, 12); MB_KARGS_AT(mb_kargs_reduce, nb00, 16);
MB_KARGS_AT(mb_kargs_reduce, nb01, 24); MB_KARGS_AT(mb_kargs_reduce, nb02, 32);
MB_KARGS_AT(mb_kargs_reduce, nb03, 40); MB_KARGS_AT(mb_kargs_reduce, nb1, 48); MB_KARGS_AT(mb_kargs_reduce, nb2, 56);
MB_KARGS_AT(mb_kargs_reduce, nb3, 64); MB_KARGS_AT(mb_kargs_reduce, mean, 72);

MB_KARGS_SIZE(mb_kargs_mul_mat, 96);
MB_KARGS_AT(mb_kargs_mul_mat, nb01, 0); MB_KARGS_AT(mb_kargs_mul_mat, nb02, 8);
MB_KARGS_AT(mb_kargs_mul_mat, nb03, 16); MB_KARGS_AT(mb_kargs_mul_mat, nb11, 24);
MB_KARGS_AT(mb_kargs_mul_mat, nb12, 32); MB_KARGS_AT(mb_kargs_mul_mat, nb13, 40);
MB_KARGS_AT(mb_kargs_mul_mat, nb1, 48); MB_KARGS_AT(mb_kargs_mul_mat, nb2, 56);
MB_KARGS_AT(mb_kargs_mul_mat, nb3, 64); MB_KARGS_AT(mb_kargs_mul_mat, ne00, 72);
MB_KARGS_AT(mb_kargs_mul_mat, ne01, 76); MB_KARGS_AT(mb_kargs_mul_mat, ne11, 80);
MB_KARGS_AT(mb_kargs_mul_mat, ne12, 84); MB_KARGS_AT(mb_kargs_mul_mat, r2, 88); MB_KARGS_AT(mb_kargs_mul_mat, r3, 92);

MB_KARGS_SIZE(mb_kargs_get_rows, 96);
MB_KARGS_AT(mb_kargs_get_rows, nb00, 0); MB_KARGS_AT(mb_kargs_get_rows, nb01, 8);
MB_KARGS_AT(mb_kargs_get_rows, nb02, 16); MB_KARGS_AT(mb_kargs_get_rows, nb03, 24);
MB_KARGS_AT(mb_kargs_get_rows, nb10, 32); MB_KARGS_AT(mb_kargs_get_rows, nb11, 40);
MB_KARGS_AT(mb_kargs_get_rows, nb12, 48); MB_KARGS_AT(mb_kargs_get_rows, nb0, 56);
MB_KARGS_AT(mb_kargs_get_rows, nb1, 64); MB_KARGS_AT(mb_kargs_get_rows, nb2, 72);
MB_KARGS_AT(mb_kargs_get_rows, nb3, 80); MB_KARGS_AT(mb_kargs_get_rows, ne00, 88);
MB_KARGS_AT(mb_kargs_get_rows, ne01, 92);

MB_KARGS_SIZE(mb_kargs_set_rows, 104);
MB_KARGS_AT(mb_kargs_set_rows, nb00, 0); MB_KARGS_AT(mb_kargs_set_rows, nb01, 8);
MB_KARGS_AT(mb_kargs_set_rows, nb02, 16); MB_KARGS_AT(mb_kargs_set_rows, nb03, 24);
MB_KARGS_AT(mb_kargs_set_rows, nb10, 32); MB_KARGS_AT(mb_kargs_set_rows, nb11, 40);
MB_KARGS_AT(mb_kargs_set_rows, nb12, 48); MB_KARGS_AT(mb_kargs_set_rows, nb0, 56);
MB_KARGS_AT(mb_kargs_set_rows, nb1, 64); MB_KARGS_AT(mb_kargs_set_rows, nb2, 72);
MB_KARGS_AT(mb_kargs_set_rows, nb3, 80); MB_KARGS_AT(mb_kargs_set_rows, ne00, 88);
MB_KARGS_AT(mb_kargs_set_rows, ne11, 92); MB_KARGS_AT(mb_kargs_set_rows, ne12, 96);
MB_KARGS_AT(mb_kargs_set_rows, ne1, 100);

MB_KARGS_SIZE(mb_kargs_cpy, 96);
MB_KARGS_AT(mb_kargs_cpy, nb00, 0); MB_KARGS_AT(mb_kargs_cpy, nb01, 8); MB_KARGS_AT(mb_kargs_cpy, nb02, 16);
MB_KARGS_AT(mb_kargs_cpy, nb03, 24); MB_KARGS_AT(mb_kargs_cpy, nb0, 32); MB_KARGS_AT(mb_kargs_cpy, nb1, 40);
MB_KARGS_AT(mb_kargs_cpy, nb2, 48); MB_KARGS_AT(mb_kargs_cpy, nb3, 56); MB_KARGS_AT(mb_kargs_cpy, ne00, 64);
MB_KARGS_AT(mb_kargs_cpy, ne01, 68); MB_KARGS_AT(mb_kargs_cpy, ne02, 72); MB_KARGS_AT(mb_kargs_cpy, ne0, 76);
MB_KARGS_AT(mb_kargs_cpy, ne1, 80); MB_KARGS_AT(mb_kargs_cpy, ne2, 84); MB_KARGS_AT(mb_kargs_cpy, same_rows, 88);
MB_KARGS_AT(mb_kargs_cpy, pad0, 92);

MB_KARGS_SIZE(mb_kargs_im2col, 104);
MB_KARGS_AT(mb_kargs_im2col, nb10, 0); MB_KARGS_AT(mb_kargs_im2col, nb11, 8); MB_KARGS_AT(mb_kargs_im2col, nb12, 16);
MB_KARGS_AT(mb_kargs_im2col, nb13, 24); MB_KARGS_AT(mb_kargs_im2col, nb1, 32); MB_KARGS_AT(mb_kargs_im2col, nb2, 40);
MB_KARGS_AT(mb_kargs_im2col, nb3, 48); MB_KARGS_AT(mb_kargs_im2col, iw, 56); MB_KARGS_AT(mb_kargs_im2col, ih, 60);
MB_KARGS_AT(mb_kargs_im2col, kw, 64); MB_KARGS_AT(mb_kargs_im2col, kh, 68); MB_KARGS_AT(mb_kargs_im2col, s0, 72);
MB_KARGS_AT(mb_kargs_im2col, s1, 76); MB_KARGS_AT(mb_kargs_im2col, p0, 80); MB_KARGS_AT(mb_kargs_im2col, p1, 84);
MB_KARGS_AT(mb_kargs_im2col, d0, 88); MB_KARGS_AT(mb_kargs_im2col, d1, 92); MB_KARGS_AT(mb_kargs_im2col, chw, 96);
MB_KARGS_AT(mb_kargs_im2col, pad0, 100);

MB_KARGS_SIZE(mb_kargs_flash_attn_ext, 232);
MB_KARGS_AT(mb_kargs_flash_attn_ext, ne01, 0); MB_KARGS_AT(mb_kargs_flash_attn_ext, ne02, 4);
MB_KARGS_AT(mb_kargs_flash_attn_ext, ne03, 8); MB_KARGS_AT(mb_kargs_flash_attn_ext, ne11, 12);
MB_KARGS_AT(mb_kargs_flash_attn_ext, ne12, 16); MB_KARGS_AT(mb_kargs_flash_attn_ext, ne13, 20);
MB_KARGS_AT(mb_kargs_flash_attn_ext, ne32, 24); MB_KARGS_AT(mb_kargs_flash_attn_ext, ne33, 28);
MB_KARGS_AT(mb_kargs_flash_attn_ext, nb00, 32); MB_KARGS_AT(mb_kargs_flash_attn_ext, nb01, 40);
MB_KARGS_AT(mb_kargs_flash_attn_ext, nb02, 48); MB_KARGS_AT(mb_kargs_flash_attn_ext, nb03, 56);
MB_KARGS_AT(mb_kargs_flash_attn_ext, nb10, 64); MB_KARGS_AT(mb_kargs_flash_attn_ext, nb11, 72);
MB_KARGS_AT(mb_kargs_flash_attn_ext, nb12, 80); MB_KARGS_AT(mb_kargs_flash_attn_ext, nb13, 88);
MB_KARGS_AT(mb_kargs_flash_attn_ext, nb20, 96); MB_KARGS_AT(mb_kargs_flash_attn_ext, nb21, 104);
MB_KARGS_AT(mb_kargs_flash_attn_ext, nb22, 112); MB_KARGS_AT(mb_kargs_flash_attn_ext, nb23, 120);
MB_KARGS_AT(mb_kargs_flash_attn_ext, nb30, 128); MB_KARGS_AT(mb_kargs_flash_attn_ext, nb31, 136);
MB_KARGS_AT(mb_kargs_flash_attn_ext, nb32, 144); MB_KARGS_AT(mb_kargs_flash_attn_ext, nb33, 152);
MB_KARGS_AT(mb_kargs_flash_attn_ext, nb1, 160); MB_KARGS_AT(mb_kargs_flash_attn_ext, nb2, 168);
MB_KARGS_AT(mb_kargs_flash_attn_ext, nb3, 176); MB_KARGS_AT(mb_kargs_flash_attn_ext, scratch_offs, 184);
MB_KARGS_AT(mb_kargs_flash_attn_ext, scale, 192); MB_KARGS_AT(mb_kargs_flash_attn_ext, softcap, 196);
MB_KARGS_AT(mb_kargs_flash_attn_ext, max_bias, 200); MB_KARGS_AT(mb_kargs_flash_attn_ext, m0, 204);
MB_KARGS_AT(mb_kargs_flash_attn_ext, m1, 208); MB_KARGS_AT(mb_kargs_flash_attn_ext, n_head_log2, 212);
MB_KARGS_AT(mb_kargs_flash_attn_ext, has_mask, 216); MB_KARGS_AT(mb_kargs_flash_attn_ext, mask_f32, 220);
MB_KARGS_AT(mb_kargs_flash_attn_ext, nwg, 224); MB_KARGS_AT(mb_kargs_flash_attn_ext, pad0, 228);

MB_KARGS_SIZE(mb_kargs_flash_attn_ext_reduce, 56);
MB_KARGS_AT(mb_kargs_flash_attn_ext_reduce, ne01, 0); MB_KARGS_AT(mb_kargs_flash_attn_ext_reduce, ne02, 4);
MB_KARGS_AT(mb_kargs_flash_attn_ext_reduce, ne03, 8); MB_KARGS_AT(mb_kargs_flash_attn_ext_reduce, dv, 12);
MB_KARGS_AT(mb_kargs_flash_attn_ext_reduce, nwg, 16); MB_KARGS_AT(mb_kargs_flash_attn_ext_reduce, pad0, 20);
MB_KARGS_AT(mb_kargs_flash_attn_ext_reduce, nb1, 24); MB_KARGS_AT(mb_kargs_flash_attn_ext_reduce, nb2, 32);
MB_KARGS_AT(mb_kargs_flash_attn_ext_reduce, nb3, 40); MB_KARGS_AT(mb_kargs_flash_attn_ext_reduce, scratch_offs, 48);

MB_KARGS_SIZE(mb_kargs_rope, 120);
MB_KARGS_AT(mb_kargs_rope, ne00, 0); MB_KARGS_AT(mb_kargs_rope, ne01, 4); MB_KARGS_AT(mb_kargs_rope, ne02, 8);
MB_KARGS_AT(mb_kargs_rope, ne03, 12); MB_KARGS_AT(mb_kargs_rope, nb00, 16); MB_KARGS_AT(mb_kargs_rope, nb01, 24);
MB_KARGS_AT(mb_kargs_rope, nb02, 32); MB_KARGS_AT(mb_kargs_rope, nb03, 40); MB_KARGS_AT(mb_kargs_rope, nb0, 48);
MB_KARGS_AT(mb_kargs_rope, nb1, 56); MB_KARGS_AT(mb_kargs_rope, nb2, 64); MB_KARGS_AT(mb_kargs_rope, nb3, 72);
MB_KARGS_AT(mb_kargs_rope, nbp0, 80); MB_KARGS_AT(mb_kargs_rope, n_dims, 88);
MB_KARGS_AT(mb_kargs_rope, theta_log2, 92); MB_KARGS_AT(mb_kargs_rope, freq_scale, 96);
MB_KARGS_AT(mb_kargs_rope, ext_factor, 100); MB_KARGS_AT(mb_kargs_rope, mscale, 104);
MB_KARGS_AT(mb_kargs_rope, corr_dim0, 108); MB_KARGS_AT(mb_kargs_rope, corr_dim1, 112);
MB_KARGS_AT(mb_kargs_rope, pad0, 116);

MB_KARGS_SIZE(mb_kargs_concat, 136);
MB_KARGS_AT(mb_kargs_concat, ne00, 0); MB_KARGS_AT(mb_kargs_concat, ne01, 4); MB_KARGS_AT(mb_kargs_concat, ne02, 8);
MB_KARGS_AT(mb_kargs_concat, ne03, 12); MB_KARGS_AT(mb_kargs_concat, nb00, 16);
MB_KARGS_AT(mb_kargs_concat, nb01, 24); MB_KARGS_AT(mb_kargs_concat, nb02, 32);
MB_KARGS_AT(mb_kargs_concat, nb03, 40); MB_KARGS_AT(mb_kargs_concat, nb10, 48);
MB_KARGS_AT(mb_kargs_concat, nb11, 56); MB_KARGS_AT(mb_kargs_concat, nb12, 64);
MB_KARGS_AT(mb_kargs_concat, nb13, 72); MB_KARGS_AT(mb_kargs_concat, ne0, 80); MB_KARGS_AT(mb_kargs_concat, ne1, 84);
MB_KARGS_AT(mb_kargs_concat, ne2, 88); MB_KARGS_AT(mb_kargs_concat, ne3, 92); MB_KARGS_AT(mb_kargs_concat, nb0, 96);
MB_KARGS_AT(mb_kargs_concat, nb1, 104); MB_KARGS_AT(mb_kargs_concat, nb2, 112);
MB_KARGS_AT(mb_kargs_concat, nb3, 120); MB_KARGS_AT(mb_kargs_concat, dim, 128);
MB_KARGS_AT(mb_kargs_concat, pad0, 132);

MB_KARGS_SIZE(mb_kargs_repeat, 96);
MB_KARGS_AT(mb_kargs_repeat, ne00, 0); MB_KARGS_AT(mb_kargs_repeat, ne01, 4); MB_KARGS_AT(mb_kargs_repeat, ne02, 8);
MB_KARGS_AT(mb_kargs_repeat, ne03, 12); MB_KARGS_AT(mb_kargs_repeat, nb00, 16);
MB_KARGS_AT(mb_kargs_repeat, nb01, 24); MB_KARGS_AT(mb_kargs_repeat, nb02, 32);
MB_KARGS_AT(mb_kargs_repeat, nb03, 40); MB_KARGS_AT(mb_kargs_repeat, ne0, 48); MB_KARGS_AT(mb_kargs_repeat, ne1, 52);
MB_KARGS_AT(mb_kargs_repeat, ne2, 56); MB_KARGS_AT(mb_kargs_repeat, ne3, 60); MB_KARGS_AT(mb_kargs_repeat, nb0, 64);
MB_KARGS_AT(mb_kargs_repeat, nb1, 72); MB_KARGS_AT(mb_kargs_repeat, nb2, 80); MB_KARGS_AT(mb_kargs_repeat, nb3, 88);

MB_KARGS_SIZE(mb_kargs_pad, 96);
MB_KARGS_AT(mb_kargs_pad, ne00, 0); MB_KARGS_AT(mb_kargs_pad, ne01, 4); MB_KARGS_AT(mb_kargs_pad, ne02, 8);
MB_KARGS_AT(mb_kargs_pad, ne03, 12); MB_KARGS_AT(mb_kargs_pad, nb00, 16); MB_KARGS_AT(mb_kargs_pad, nb01, 24);
MB_KARGS_AT(mb_kargs_pad, nb02, 32); MB_KARGS_AT(mb_kargs_pad, nb03, 40); MB_KARGS_AT(mb_kargs_pad, ne0, 48);
MB_KARGS_AT(mb_kargs_pad, ne1, 52); MB_KARGS_AT(mb_kargs_pad, ne2, 56); MB_KARGS_AT(mb_kargs_pad, ne3, 60);
MB_KARGS_AT(mb_kargs_pad, nb0, 64); MB_KARGS_AT(mb_kargs_pad, nb1, 72); MB_KARGS_AT(mb_kargs_pad, nb2, 80);
MB_KARGS_AT(mb_kargs_pad, nb3, 88);
MB_KARGS_SIZE(mb_kargs_pad_reflect_1d, 104);
MB_KARGS_AT(mb_kargs_pad_reflect_1d, ne00, 0); MB_KARGS_AT(mb_kargs_pad_reflect_1d, ne01, 4);
MB_KARGS_AT(mb_kargs_pad_reflect_1d, ne02, 8); MB_KARGS_AT(mb_kargs_pad_reflect_1d, ne03, 12);
MB_KARGS_AT(mb_kargs_pad_reflect_1d, nb00, 16); MB_KARGS_AT(mb_kargs_pad_reflect_1d, nb01, 24);
MB_KARGS_AT(mb_kargs_pad_reflect_1d, nb02, 32); MB_KARGS_AT(mb_kargs_pad_reflect_1d, nb03, 40);
MB_KARGS_AT(mb_kargs_pad_reflect_1d, ne0, 48); MB_KARGS_AT(mb_kargs_pad_reflect_1d, ne1, 52);
MB_KARGS_AT(mb_kargs_pad_reflect_1d, ne2, 56); MB_KARGS_AT(mb_kargs_pad_reflect_1d, ne3, 60);
MB_KARGS_AT(mb_kargs_pad_reflect_1d, nb0, 64); MB_KARGS_AT(mb_kargs_pad_reflect_1d, nb1, 72);
MB_KARGS_AT(mb_kargs_pad_reflect_1d, nb2, 80); MB_KARGS_AT(mb_kargs_pad_reflect_1d, nb3, 88);
MB_KARGS_AT(mb_kargs_pad_reflect_1d, p0, 96); MB_KARGS_AT(mb_kargs_pad_reflect_1d, p1, 100);
