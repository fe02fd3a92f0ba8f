var searchData=
[
  ['grad_5fclip_2ehpp_0',['grad_clip.hpp',['../grad__clip_8hpp.html',1,'']]]
];
