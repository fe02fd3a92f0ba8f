var searchData=
[
  ['single_2ehpp_0',['single.hpp',['../single_8hpp.html',1,'']]],
  ['split_2ehpp_1',['split.hpp',['../split_8hpp.html',1,'']]],
  ['state_2ehpp_2',['state.hpp',['../state_8hpp.html',1,'']]],
  ['state_5fdict_2ehpp_3',['state_dict.hpp',['../state__dict_8hpp.html',1,'']]],
  ['step_5fphases_2ehpp_4',['step_phases.hpp',['../step__phases_8hpp.html',1,'']]],
  ['steps_2ehpp_5',['steps.hpp',['../steps_8hpp.html',1,'']]]
];
